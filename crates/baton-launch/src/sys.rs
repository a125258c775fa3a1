//! Thin wrappers over the Linux system calls the launcher needs: signal
//! catching, reaping, the job memfd, interface addresses, and the child-side
//! setup between fork and exec. Most of the launcher's `unsafe` lives here.

use std::ffi::CString;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{mpsc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::Duration;

use baton_pmi::auth::Secret;

use crate::Event;

/// Signals mpiexec forwards to the ranks.
const FORWARDED: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Write end of the self-pipe the signal handler reports into.
static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);

/// This machine's host name (shared with the transports, which name hosts the same way).
pub use baton_transport::sys::hostname;

/// Whether `h` names this machine: a loopback name, our host name, or one
/// of `addrs` (the addresses of our interfaces) written out.
pub fn is_local_host(h: &str, me: &str, addrs: &[IpAddr]) -> bool {
    let short = |s: &str| s.split('.').next().unwrap_or("").to_ascii_lowercase();
    let h_l = h.to_ascii_lowercase();
    let bare = h_l.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return ip.is_loopback() || addrs.contains(&ip);
    }
    matches!(h_l.as_str(), "localhost" | "localhost.localdomain" | "ip6-localhost")
        || h_l == me.to_ascii_lowercase()
        || (!h_l.contains('.') && h_l == short(me))
}

/// Every address of every interface that is up.
pub fn host_addrs() -> Vec<IpAddr> {
    baton_transport::sys::interface_addrs().into_iter().filter(|a| a.up).map(|a| a.addr).collect()
}

/// A listener on every address of this host, IPv6 and IPv4 alike: one dual-stack socket,
/// whatever `net.ipv6.bindv6only` says; IPv4 alone where the kernel has no IPv6.
pub fn listen_everywhere() -> std::io::Result<std::net::TcpListener> {
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: socket has no memory preconditions; a negative result is checked.
    let fd = unsafe { libc::socket(libc::AF_INET6, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return std::net::TcpListener::bind(("0.0.0.0", 0));
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
    let off: libc::c_int = 0;
    // SAFETY: the option value is a c_int of the size passed.
    let dual = unsafe {
        libc::setsockopt(
            raw,
            libc::IPPROTO_IPV6,
            libc::IPV6_V6ONLY,
            (&off as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    } == 0;
    if !dual {
        return std::net::TcpListener::bind(("0.0.0.0", 0));
    }
    // SAFETY: all-zero is a valid sockaddr_in6 (the unspecified address, port 0).
    let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    // SAFETY: `sa` is a sockaddr_in6 of the length passed; listen takes only the descriptor.
    let ok = unsafe {
        libc::bind(
            raw,
            (&sa as *const libc::sockaddr_in6).cast(),
            std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
        ) == 0
            && libc::listen(raw, 128) == 0
    };
    if !ok {
        return std::net::TcpListener::bind(("0.0.0.0", 0));
    }
    Ok(std::net::TcpListener::from(fd))
}

pub fn random_job_id() -> Result<u64, String> {
    loop {
        let mut b = [0u8; 8];
        getrandom::fill(&mut b).map_err(|e| format!("cannot obtain random bytes: {e}"))?;
        let id = u64::from_le_bytes(b) >> 1; // stays positive if read as i64
        if id != 0 {
            return Ok(id);
        }
    }
}

/// The job's shared-memory object: anonymous, so it vanishes with its last
/// open descriptor and nothing can be left behind in /dev/shm.
pub fn create_job_memfd(job_id: u64) -> io::Result<OwnedFd> {
    let name = std::ffi::CString::new(format!("baton-shm-{job_id}")).expect("no NUL in name");
    // SAFETY: name is a valid NUL-terminated string for the call's duration.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by memfd_create and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = sig as u8;
        // SAFETY: write(2) is async-signal-safe; errno is saved and restored
        // so the interrupted code does not observe a change.
        unsafe {
            let errno = *libc::__errno_location();
            libc::write(fd, (&byte as *const u8).cast(), 1);
            *libc::__errno_location() = errno;
        }
    }
}

/// Reads a secret line (64 hex digits) from stdin, waiting at most `limit`:
/// a thread reads, so a parent that never writes cannot hold us forever.
/// Nothing past the line is used. `what` names the secret in messages.
pub fn read_secret(limit: Duration, what: &str) -> Result<Secret, String> {
    let (tx, rx) = mpsc::channel();
    thread::Builder::new()
        .name("secret".into())
        .spawn(move || {
            let mut line = Vec::new();
            let got = io::BufRead::read_until(&mut io::Read::take(io::stdin().lock(), 200), b'\n', &mut line);
            let _ = tx.send(got.map(|_| line));
        })
        .map_err(|e| format!("cannot start a thread: {e}"))?;
    match rx.recv_timeout(limit) {
        Ok(Ok(line)) if line.ends_with(b"\n") => {
            let hex = String::from_utf8_lossy(&line).trim().to_owned();
            Secret::from_hex(&hex)
                .map_err(|_| format!("malformed {what} on stdin (expected 64 hex digits and a newline)"))
        }
        Ok(Ok(_)) => Err(format!("stdin closed before the {what} arrived")),
        Ok(Err(e)) => Err(format!("cannot read the {what} from stdin: {e}")),
        Err(_) => Err(format!("no {what} arrived on stdin within {} s", limit.as_secs())),
    }
}

/// Closes every descriptor from `first` up. For a process started by a
/// program that is not ours (the singleton): whatever else it forgot to
/// mark close-on-exec would otherwise be held open by us, and inherited by
/// every process we start. Must run before this process opens anything.
pub fn close_fds_from(first: u32) {
    // SAFETY: close_range only closes descriptors; none at or above `first`
    // is owned by anything in this process yet (see above).
    let rc = unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, 0u32) };
    if rc != 0 {
        // Kernels before 5.9: walk the open descriptors instead.
        let open: Vec<i32> = std::fs::read_dir("/proc/self/fd")
            .map(|dir| dir.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
            .unwrap_or_default();
        for fd in open.into_iter().filter(|&fd| fd >= first as i32) {
            // SAFETY: as above; the read_dir descriptor is closed already,
            // so a stale number only yields EBADF.
            unsafe { libc::close(fd) };
        }
    }
}

/// Watches process `pid`, which need not be our child, and sends
/// [`Event::SingletonGone`] once it has ended (at once if it already has).
/// An error if there is no such process.
pub fn watch_process(pid: i32, tx: Sender<Event>) -> io::Result<()> {
    // SAFETY: getppid has no preconditions.
    let is_parent = unsafe { libc::getppid() } == pid;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor
    // (close-on-exec) or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let pidfd = if fd >= 0 {
        // SAFETY: the descriptor was just created and is ours alone.
        Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
    } else {
        let err = io::Error::last_os_error();
        // Otherwise no pidfds (kernel before 5.3, or a seccomp filter).
        if err.raw_os_error() == Some(libc::ESRCH) || process_gone(pid, is_parent) {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        None
    };
    thread::Builder::new().name("watch".into()).spawn(move || {
        if !pidfd.is_some_and(|fd| wait_readable(&fd)) {
            while !process_gone(pid, is_parent) {
                thread::sleep(Duration::from_millis(100));
            }
        }
        let _ = tx.send(Event::SingletonGone);
    })?;
    Ok(())
}

/// Blocks until `fd` is readable (a pidfd: its process has exited, reaped
/// or not); false if poll fails for another reason than a signal.
fn wait_readable(fd: &OwnedFd) -> bool {
    let mut pfd = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    loop {
        // SAFETY: pfd is one valid pollfd, alive during the call.
        if unsafe { libc::poll(&mut pfd, 1, -1) } >= 0 {
            return true;
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return false;
        }
    }
}

/// Whether `pid` has ended. A parent's end is seen before it is reaped (we
/// are reparented when it exits); for any other process kill(0) fails only
/// once it has been reaped.
fn process_gone(pid: i32, is_parent: bool) -> bool {
    // SAFETY: getppid and kill with signal 0 take plain integers and change
    // nothing.
    unsafe {
        if is_parent {
            libc::getppid() != pid
        } else {
            libc::kill(pid, 0) != 0 && *libc::__errno_location() == libc::ESRCH
        }
    }
}

/// Catches SIGINT/SIGTERM/SIGHUP and turns them into [`Event::Signal`].
pub fn install_signal_forwarder(tx: Sender<Event>) -> io::Result<()> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned by us alone.
    let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // The write end must outlive every possible signal: leak it on purpose.
    SIGNAL_PIPE.store(std::os::fd::IntoRawFd::into_raw_fd(write_end), Ordering::Relaxed);
    thread::Builder::new().name("signals".into()).spawn(move || {
        let mut f = std::fs::File::from(read_end);
        let mut b = [0u8; 1];
        while let Ok(1) = io::Read::read(&mut f, &mut b) {
            if tx.send(Event::Signal(i32::from(b[0]))).is_err() {
                return;
            }
        }
    })?;
    for sig in FORWARDED {
        // SAFETY: sa is fully initialized (zeroed, then the fields we use);
        // on_signal only performs async-signal-safe work.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Runs in the child between fork and exec; must stay async-signal-safe.
/// `memfd` (the host's shared-memory fd) is handed on when given, and the
/// process is bound to `cpus` when given.
pub fn child_setup(parent: i32, memfd: Option<RawFd>, cpus: Option<&libc::cpu_set_t>) -> io::Result<()> {
    // SAFETY: only async-signal-safe calls on plain integers and a zeroed
    // sigaction; nothing is allocated.
    unsafe {
        // Our handler would write into mpiexec's signal pipe until exec.
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = libc::SIG_DFL;
        for sig in FORWARDED {
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
        // Die with mpiexec even if it is SIGKILLed.
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        // mpiexec may have died before prctl took effect.
        if libc::getppid() != parent {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        // The job memfd is close-on-exec in mpiexec; the rank inherits it.
        if let Some(fd) = memfd {
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        // `--bind-to`: the program starts on its mask.
        if let Some(set) = cpus {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// `cpus` as a mask for `sched_setaffinity` (CPUs past `CPU_SETSIZE` left out).
pub fn cpu_set(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain bits; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
        // SAFETY: `c` is below CPU_SETSIZE, checked above.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    set
}

/// Held while children are forked and while the reaper reaps. std's
/// `Command::spawn` reaps a child whose exec failed itself and panics if
/// that child's status is gone, so the reaper must never reap one while a
/// spawn is under way; children forked after the reaper started (spawned
/// jobs) need that. The flag is set while the reaper sleeps for lack of
/// children.
static SPAWN_GATE: Mutex<bool> = Mutex::new(false);
/// Wakes a sleeping reaper once a child exists again.
static REAPER_WAKE: Condvar = Condvar::new();

/// Exclusion from the reaper while forking; see [`spawn_lock`].
pub struct SpawnLock(MutexGuard<'static, bool>);

/// To be held around every fork that the reaper may run concurrently with.
pub fn spawn_lock() -> SpawnLock {
    SpawnLock(SPAWN_GATE.lock().unwrap_or_else(PoisonError::into_inner))
}

impl Drop for SpawnLock {
    fn drop(&mut self) {
        // There may be children now; the reaper looks again.
        *self.0 = false;
        REAPER_WAKE.notify_all();
    }
}

/// `waitid` on any exited child without reaping it: its pid, or the error.
fn peek_exited(flags: i32) -> io::Result<i32> {
    // SAFETY: an all-zero siginfo_t is a valid out-buffer for waitid.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: info is a valid out-pointer for the duration of the call.
    if unsafe { libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOWAIT | flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: waitid succeeded, so info holds a SIGCHLD-style record (or
    // all zeros with WNOHANG and nothing to report: pid 0).
    Ok(unsafe { info.si_pid() })
}

/// Reaps every child and reports it as [`Event::Exited`]. While mpiexec
/// has no child it sleeps until a [`SpawnLock`] is released, since spawned
/// jobs may start children later.
pub fn start_reaper(tx: Sender<Event>) {
    let spawned = thread::Builder::new().name("reaper".into()).spawn(move || loop {
        // Looking without reaping lets the status be taken under the gate.
        let pid = match peek_exited(0) {
            Ok(pid) => pid,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) if e.raw_os_error() == Some(libc::ECHILD) => {
                let mut idle = SPAWN_GATE.lock().unwrap_or_else(PoisonError::into_inner);
                // Under the gate nobody forks: no child now means none until
                // the next SpawnLock is dropped.
                if let Err(e) = peek_exited(libc::WNOHANG) {
                    if e.raw_os_error() == Some(libc::ECHILD) {
                        *idle = true;
                        while *idle {
                            idle = REAPER_WAKE.wait(idle).unwrap_or_else(PoisonError::into_inner);
                        }
                    }
                }
                continue;
            }
            Err(_) => return,
        };
        let gate = SPAWN_GATE.lock().unwrap_or_else(PoisonError::into_inner);
        let mut status = 0;
        // SAFETY: status is a valid out-pointer.
        let reaped = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        drop(gate);
        // Anything else: std already reaped it (a failed exec).
        if reaped == pid && pid > 0 && tx.send(Event::Exited(pid, status)).is_err() {
            return;
        }
    });
    if spawned.is_err() {
        say!("mpiexec: cannot start the reaper thread");
        std::process::exit(1);
    }
}

/// Whether `path` is a file this process could execute.
pub fn is_executable(path: &Path) -> bool {
    if !path.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: c is a valid NUL-terminated string for the call's duration.
    unsafe { libc::access(c.as_ptr(), libc::X_OK) == 0 }
}

/// Rank 0 reads mpiexec's stdin unless that would stop mpiexec: reading a
/// terminal from a background process group raises SIGTTIN.
pub fn may_read_stdin() -> bool {
    // SAFETY: isatty/tcgetpgrp/getpgrp take plain integers.
    unsafe {
        if libc::isatty(0) == 0 {
            // Not a terminal: a pipe, a file, or closed (then reading hits EOF).
            return libc::fcntl(0, libc::F_GETFD) >= 0;
        }
        libc::tcgetpgrp(0) == libc::getpgrp()
    }
}

pub fn kill_group(pid: i32, sig: i32) {
    if pid > 0 {
        // SAFETY: kill with a negative pid signals that process group; a
        // vanished group only yields ESRCH.
        unsafe { libc::kill(-pid, sig) };
    }
}

/// The error text without Rust's " (os error N)" suffix.
pub fn describe_io_error(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_owned(),
        None => s,
    }
}

pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "Hangup",
        libc::SIGINT => "Interrupt",
        libc::SIGQUIT => "Quit",
        libc::SIGILL => "Illegal instruction",
        libc::SIGTRAP => "Trace/breakpoint trap",
        libc::SIGABRT => "Aborted",
        libc::SIGBUS => "Bus error",
        libc::SIGFPE => "Floating point exception",
        libc::SIGKILL => "Killed",
        libc::SIGUSR1 => "User defined signal 1",
        libc::SIGSEGV => "Segmentation fault",
        libc::SIGUSR2 => "User defined signal 2",
        libc::SIGPIPE => "Broken pipe",
        libc::SIGALRM => "Alarm clock",
        libc::SIGTERM => "Terminated",
        libc::SIGXCPU => "CPU time limit exceeded",
        libc::SIGXFSZ => "File size limit exceeded",
        libc::SIGSYS => "Bad system call",
        _ => "unknown signal",
    }
}

/// Writes `msg` and a newline to stderr with one `write`: mpiexec and the proxies of a job
/// started through a remote shell share one stderr, and lines written piecewise (as
/// `eprintln!` may) interleave mid-line.
pub fn say_line(msg: &str) {
    use std::io::Write;
    let mut line = String::with_capacity(msg.len() + 1);
    line.push_str(msg);
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_host_names() {
        let me = "node1.example.org";
        let addrs = ["10.0.0.5".parse().unwrap()];
        assert!(is_local_host("localhost", me, &addrs));
        assert!(is_local_host("node1", me, &addrs));
        assert!(is_local_host("NODE1.example.org", me, &addrs));
        assert!(is_local_host("10.0.0.5", me, &addrs));
        assert!(is_local_host("127.0.0.1", me, &addrs));
        assert!(is_local_host("[::1]", me, &addrs));
        assert!(!is_local_host("10.0.0.6", me, &addrs));
        assert!(!is_local_host("node2", me, &addrs));
        assert!(!is_local_host("node1.other.org", me, &addrs));
    }

    #[test]
    fn a_watched_process_is_reported_gone_before_it_is_reaped() {
        let mut child = std::process::Command::new("sleep").arg("10").spawn().unwrap();
        let pid = child.id() as i32;
        let (tx, rx) = mpsc::channel();
        watch_process(pid, tx).unwrap();
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err(), "reported while alive");
        assert!(!process_gone(pid, false));
        child.kill().unwrap();
        // Still a zombie here: the pidfd reports the exit itself.
        assert!(matches!(rx.recv_timeout(Duration::from_secs(5)), Ok(Event::SingletonGone)));
        child.wait().unwrap();
        assert!(process_gone(pid, false));
        let (tx, _rx) = mpsc::channel();
        assert_eq!(watch_process(pid, tx).unwrap_err().raw_os_error(), Some(libc::ESRCH));
    }

    #[test]
    fn dual_stack_listener_takes_ipv4_and_ipv6() {
        let l = listen_everywhere().unwrap();
        let port = l.local_addr().unwrap().port();
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
        if l.local_addr().unwrap().is_ipv6() {
            assert!(std::net::TcpStream::connect(("::1", port)).is_ok());
        }
    }
}
