//! Test client for the launcher's integration tests: a tiny "MPI program"
//! that drives `baton_pmi::PmiClient` in the way named by its first
//! argument and checks what it gets back. Built with the examples, so it is
//! always present next to the test binaries.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{exit, Command, Stdio};
use std::time::Duration;

use baton_pmi::auth::Secret;
use baton_pmi::{PmiClient, PmiErrorKind, SpawnCmd};

fn check(cond: bool, what: &str) {
    if !cond {
        eprintln!("pmi_probe: check failed: {what}");
        exit(99);
    }
}

fn init() -> PmiClient {
    match PmiClient::from_env() {
        Ok(Some(c)) => c,
        Ok(None) => {
            eprintln!("pmi_probe: not started by mpiexec");
            exit(98);
        }
        Err(e) => {
            eprintln!("pmi_probe: init failed: {e}");
            exit(97);
        }
    }
}

/// put / fence / get over two epochs, plus the memfd shared by each host's ranks.
fn kv(c: &mut PmiClient) {
    let (rank, size) = (c.rank(), c.size());
    check(std::env::var("BATON_PMI_SECRET").is_err(), "secret removed from env");
    c.put("addr", format!("addr-of-{rank}").as_bytes()).unwrap();
    c.put("big", &vec![rank as u8; 100_000]).unwrap();
    let fd = c.shm_fd().expect("shm fd");
    // The memfd is per host: the first rank of each host writes it and the
    // other ranks of that host (same BATON_NODE) must see it.
    let node = std::env::var("BATON_NODE").unwrap_or_default();
    check(!node.is_empty(), "BATON_NODE set");
    let local_rank: u32 = std::env::var("BATON_LOCAL_RANK").ok().and_then(|v| v.parse().ok()).unwrap_or(u32::MAX);
    check(local_rank != u32::MAX, "BATON_LOCAL_RANK set");
    if local_rank == 0 {
        let msg = format!("job-{}-{node}", c.job_id());
        // SAFETY: fd is the open memfd; msg is a valid buffer.
        let n = unsafe { libc::pwrite(fd, msg.as_ptr().cast(), msg.len(), 0) };
        check(n == msg.len() as isize, "pwrite to memfd");
    }
    c.fence().unwrap();
    for r in 0..size {
        let v = c.get(r, "addr").unwrap();
        check(v.as_deref() == Some(format!("addr-of-{r}").as_bytes()), "epoch 1 value");
        let big = c.get(r, "big").unwrap().unwrap();
        check(big.len() == 100_000 && big.iter().all(|&b| b == r as u8), "big value");
    }
    let expect = format!("job-{}-{node}", c.job_id());
    let mut buf = vec![0u8; expect.len()];
    // SAFETY: fd is the open memfd; buf is writable for its length.
    let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
    check(n == buf.len() as isize && buf == expect.as_bytes(), "memfd shared by the ranks of a host");
    c.put("second", &[rank as u8, 7]).unwrap();
    c.fence().unwrap();
    for r in 0..size {
        check(c.get(r, "second").unwrap() == Some(vec![r as u8, 7]), "epoch 2 value");
    }
    check(c.get(0, "nothing").unwrap().is_none(), "missing key");
    println!("rank {rank} of {size} ok appnum {} universe {}", c.appnum(), c.universe_size());
}

fn print_pid(c: &PmiClient) {
    println!("rank {} pid {}", c.rank(), std::process::id());
    std::io::stdout().flush().unwrap();
}

/// CLOCK_MONOTONIC in nanoseconds: comparable between processes of a host.
fn mono_ns() -> u128 {
    // SAFETY: an all-zero timespec is valid and ts is a valid out-pointer.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}

/// `PROG|N|KEY=VALUE;KEY=VALUE|ARG ARG`: `self` is this program, `\n` in
/// an info value a newline.
fn parse_cmd(spec: &str) -> SpawnCmd {
    let mut parts = spec.splitn(4, '|');
    let mut program = parts.next().unwrap_or_default().to_owned();
    if program == "self" {
        program = std::env::current_exe().unwrap().to_str().unwrap().to_owned();
    }
    let maxprocs = parts.next().unwrap_or("1").parse().unwrap();
    let info = parts
        .next()
        .unwrap_or_default()
        .split(';')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_owned(), v.replace("\\n", "\n"))
        })
        .collect();
    let args = parts.next().unwrap_or_default().split(' ').filter(|a| !a.is_empty()).map(str::to_owned).collect();
    SpawnCmd { program, args, maxprocs, info }
}

/// The processes mpiexec (this rank's parent) has forked and not reaped.
fn launcher_children() -> Vec<i32> {
    // SAFETY: getppid has no preconditions.
    children_of(unsafe { libc::getppid() })
}

/// The processes `ppid` has forked and not reaped.
fn children_of(ppid: i32) -> Vec<i32> {
    let mut pids = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{ppid}/task")).unwrap().flatten() {
        let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        pids.extend(list.split_whitespace().map(|p| p.parse::<i32>().unwrap()));
    }
    pids
}

/// Rank 0 runs the steps: `spawn:CMD[+CMD...]` (one request, commands as
/// in `parse_cmd`), `pid`, `wait-stdin` (one line), `exit:N` (without
/// finalizing), `children` (waits up to 3 s for mpiexec to have no child
/// but the ranks of the first job, and prints how many others it has).
/// The other ranks wait in a fence until rank 0 is done, so that their
/// slots stay taken meanwhile.
fn parent(c: &mut PmiClient, steps: &[String]) {
    if c.rank() == 0 {
        parent_steps(c, steps);
    }
    c.fence().unwrap();
}

fn parent_steps(c: &mut PmiClient, steps: &[String]) {
    for (i, step) in steps.iter().enumerate() {
        if let Some(spec) = step.strip_prefix("spawn:") {
            let cmds: Vec<SpawnCmd> = spec.split('+').map(parse_cmd).collect();
            match c.spawn(&cmds, &format!("port-{i}")) {
                Ok((job, size)) => println!("spawned job {job} size {size}"),
                Err(e) => {
                    check(e.kind() == PmiErrorKind::Launcher, "spawn refusals come from the launcher");
                    println!("spawn error: {}", e.message());
                }
            }
        } else if step == "children" {
            let deadline = std::time::Instant::now() + Duration::from_secs(3);
            let others = loop {
                let others = launcher_children().len().saturating_sub(c.size() as usize);
                if others == 0 || std::time::Instant::now() > deadline {
                    break others;
                }
                std::thread::sleep(Duration::from_millis(10));
            };
            println!("other children {others}");
        } else if step == "pid" {
            print_pid(c);
        } else if step == "wait-stdin" {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).unwrap();
        } else if let Some(code) = step.strip_prefix("exit:") {
            exit(code.parse().unwrap());
        } else {
            eprintln!("pmi_probe: unknown step '{step}'");
            exit(2);
        }
    }
}

/// Open descriptors and threads of mpiexec (this rank's parent).
fn launcher_usage() -> (usize, usize) {
    // SAFETY: getppid has no preconditions.
    let ppid = unsafe { libc::getppid() };
    let count = |what: &str| std::fs::read_dir(format!("/proc/{ppid}/{what}")).unwrap().count();
    (count("fd"), count("task"))
}

/// `count` spawn requests of 1-4 quiet children each, then reports
/// mpiexec's descriptors and threads before and after (once they settle).
fn spawn_loop(c: &mut PmiClient, count: usize) {
    let before = launcher_usage();
    let me = std::env::current_exe().unwrap().to_str().unwrap().to_owned();
    for i in 0..count {
        let cmd = SpawnCmd {
            program: me.clone(),
            args: vec!["child-quiet".into()],
            maxprocs: 1 + i as u32 % 4,
            info: vec![],
        };
        c.spawn(&[cmd], "loop").unwrap();
    }
    let peak = launcher_usage();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut after = launcher_usage();
    while (after.0 > before.0 || after.1 > before.1) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        after = launcher_usage();
    }
    println!("loop {count} fds {} {} {} threads {} {} {}", before.0, peak.0, after.0, before.1, peak.1, after.1);
    if after.1 > before.1 {
        // SAFETY: getppid has no preconditions.
        let ppid = unsafe { libc::getppid() };
        let names: Vec<String> = std::fs::read_dir(format!("/proc/{ppid}/task"))
            .unwrap()
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
            .map(|n| n.trim().to_owned())
            .collect();
        println!("launcher threads left: {names:?}");
    }
}

/// `reps` times: spawn `n` children that print when they started.
fn spawn_time(c: &mut PmiClient, n: u32, reps: usize) {
    let me = std::env::current_exe().unwrap().to_str().unwrap().to_owned();
    for _ in 0..reps {
        let cmd = SpawnCmd { program: me.clone(), args: vec!["child-time".into()], maxprocs: n, info: vec![] };
        let t0 = mono_ns();
        let (job, _) = c.spawn(&[cmd], "time").unwrap();
        let t1 = mono_ns();
        println!("request {job} {t0} {t1}");
        // Let the children finish so the next request is timed alone.
        std::thread::sleep(Duration::from_millis(150));
    }
}

/// A spawned process: reports what the launcher told it.
fn child(mode: &str) {
    let started = mono_ns();
    let port = std::env::var("BATON_PARENT_PORT");
    check(port.is_ok(), "BATON_PARENT_PORT set in a spawned process");
    let job_env = std::env::var("BATON_JOB_ID").unwrap_or_default();
    let mut c = init();
    check(c.job_id().to_string() == job_env, "job id");
    match mode {
        "child-time" => {
            println!("started {} {} {started}", c.job_id(), c.rank());
        }
        "child-quiet" => {}
        "child-linger" => {
            c.fence().unwrap();
            std::thread::sleep(Duration::from_millis(300));
            println!("lingered pid {}", std::process::id());
        }
        "child-abort" => {
            c.fence().unwrap();
            let e = c.abort(7, "boom");
            eprintln!("pmi_probe: abort returned {e:?}");
            exit(96);
        }
        "child-sleep" => {
            c.fence().unwrap();
            println!("child rank {} pid {}", c.rank(), std::process::id());
            std::io::stdout().flush().unwrap();
            std::thread::sleep(Duration::from_secs(30));
        }
        "child-spawn" => {
            // A spawned job spawning in turn: two plain children, one per host.
            c.fence().unwrap();
            if c.rank() == 0 {
                let me = std::env::current_exe().unwrap().to_str().unwrap().to_owned();
                let cmd = SpawnCmd {
                    program: me,
                    args: vec!["child".into()],
                    maxprocs: 2,
                    info: vec![("map_by".into(), "node".into())],
                };
                match c.spawn(&[cmd], "grandchild") {
                    Ok((job, size)) => println!("grandchildren job {job} size {size}"),
                    Err(e) => println!("grandchildren error: {}", e.message()),
                }
            }
        }
        _ => {
            // Every rank's host, through the job's fence.
            let env = |n: &str| std::env::var(n).unwrap_or_default();
            c.put("node", env("BATON_NODE").as_bytes()).unwrap();
            c.fence().unwrap();
            let peers: Vec<String> = (0..c.size())
                .map(|r| String::from_utf8(c.get(r, "node").unwrap().expect("every rank's node")).unwrap())
                .collect();
            println!(
                "child job {} rank {} size {} appnum {} port {} universe {} local {}/{} node {} cwd {} foo {} argv0 {} args {} peers {} pid {}",
                c.job_id(),
                c.rank(),
                c.size(),
                c.appnum(),
                port.unwrap_or_default(),
                c.universe_size(),
                env("BATON_LOCAL_RANK"),
                env("BATON_LOCAL_SIZE"),
                env("BATON_NODE"),
                std::env::current_dir().unwrap().display(),
                env("FOO"),
                std::env::args().next().unwrap_or_default(),
                std::env::args().skip(1).collect::<Vec<_>>().join(","),
                peers.join(","),
                std::process::id(),
            );
        }
    }
    c.finalize().unwrap();
}

/// Plays the MPI library of a process started without mpiexec: starts
/// `MPIEXEC --singleton-server JOB_ID PID` as the library does (secret on
/// stdin, a pipe on descriptor 3 for the address, read to end of file),
/// connects as rank 0 and runs `steps`. Changing the start: `secret:TEXT`
/// (sent instead of the secret), `no-addr-fd`, `pid:N` (instead of ours),
/// `leak-fd` (an inheritable descriptor mpiexec is given by mistake; the
/// step `count-leaks` counts its copies in mpiexec and its children).
/// Steps: `spawn:CMD[+CMD...]` (as in `parse_cmd`), `finalize`,
/// `disconnect` (drops the connection without finalizing), `abort:CODE`
/// (acknowledged, then disconnects as an exiting process would),
/// `sleep:SECS`, `wait-stdin` (one line),
/// `wait-mpiexec` (prints its exit status). Without an address, prints `no address` and waits.
fn singleton_server(mpiexec: &str, steps: &[String]) {
    let secret = Secret::generate().unwrap();
    let job_id = 1000 + u64::from(std::process::id());
    let opt = |prefix: &str| steps.iter().find_map(|s| s.strip_prefix(prefix).map(str::to_owned));
    let secret_line = opt("secret:").unwrap_or_else(|| secret.to_hex());
    let map_fd = !steps.iter().any(|s| s == "no-addr-fd");
    let pid = opt("pid:").unwrap_or_else(|| std::process::id().to_string());

    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == 0, "pipe2");
    // SAFETY: both descriptors were just created and are owned by nobody else.
    let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let w = write_end.as_raw_fd();
    // After the pipe, so that it is not descriptor 3, which dup2 replaces.
    let _leak = steps.iter().any(|s| s == "leak-fd").then(|| {
        // SAFETY: the name is NUL-terminated; flags 0 leave it inheritable.
        let fd = unsafe { libc::memfd_create(c"baton-leak-check".as_ptr(), 0) };
        check(fd >= 0, "memfd_create");
        // SAFETY: just created, owned by nobody else.
        unsafe { OwnedFd::from_raw_fd(fd) }
    });
    let mut cmd = Command::new(mpiexec);
    cmd.args(["--singleton-server", &job_id.to_string(), &pid]).stdin(Stdio::piped());
    // SAFETY: between fork and exec the closure only calls dup2, fcntl and
    // close, which are async-signal-safe, and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            let rc = if !map_fd {
                // Whatever this process may have inherited there.
                libc::close(3);
                0
            } else if w == 3 {
                // dup2 onto itself would leave close-on-exec set.
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(w, 3)
            };
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut launcher = cmd.spawn().unwrap();
    println!("mpiexec pid {}", launcher.id());
    std::io::stdout().flush().unwrap();
    drop(write_end);
    // It may have refused to start already.
    let _ = launcher.stdin.take().unwrap().write_all(format!("{secret_line}\n").as_bytes());
    let mut addr = String::new();
    File::from(read_end).read_to_string(&mut addr).unwrap();
    let wait = |launcher: &mut std::process::Child| {
        let st = launcher.wait().unwrap();
        println!("mpiexec status {}", st.code().map_or_else(|| format!("{st}"), |c| c.to_string()));
    };
    let Some(addr) = addr.strip_suffix('\n') else {
        check(addr.is_empty(), "the address is one whole line");
        println!("no address");
        wait(&mut launcher);
        return;
    };
    check(!addr.contains('\n'), "exactly one line");
    let mut c = Some(PmiClient::connect(addr, &secret, 0, job_id).unwrap());
    check(c.as_ref().unwrap().size() == 1, "a job of one");
    for (i, step) in steps.iter().enumerate() {
        if let Some(spec) = step.strip_prefix("spawn:") {
            let cmds: Vec<SpawnCmd> = spec.split('+').map(parse_cmd).collect();
            match c.as_mut().unwrap().spawn(&cmds, &format!("port-{i}")) {
                Ok((job, size)) => println!("spawned job {job} size {size}"),
                Err(e) => println!("spawn error: {}", e.message()),
            }
        } else if step == "finalize" {
            c.as_mut().unwrap().finalize().unwrap();
        } else if step == "disconnect" {
            c = None;
        } else if let Some(code) = step.strip_prefix("abort:") {
            c.as_mut().unwrap().request_abort(code.parse().unwrap(), "singleton gives up").unwrap();
            c = None;
        } else if let Some(secs) = step.strip_prefix("sleep:") {
            std::thread::sleep(Duration::from_secs_f64(secs.parse().unwrap()));
        } else if step == "count-leaks" {
            let mut pids = children_of(launcher.id() as i32);
            pids.push(launcher.id() as i32);
            let leaked = |pid: &i32| {
                let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().flatten();
                fds.filter(|e| {
                    std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().contains("baton-leak-check"))
                })
                .count()
            };
            println!("leaks {} in {} processes", pids.iter().map(leaked).sum::<usize>(), pids.len());
        } else if step == "wait-stdin" {
            std::io::stdin().read_line(&mut String::new()).unwrap();
        } else if step == "wait-mpiexec" {
            wait(&mut launcher);
        }
        std::io::stdout().flush().unwrap();
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map(String::as_str).unwrap_or("");
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    if mode == "singleton-server" {
        singleton_server(&arg(1), &args[2..]);
        return;
    }
    if mode == "singleton" {
        match PmiClient::from_env() {
            Ok(None) => println!("singleton"),
            other => {
                eprintln!("unexpected: {other:?}");
                exit(1)
            }
        }
        return;
    }
    if mode.starts_with("child") {
        child(mode);
        return;
    }
    let mut c = init();
    let rank = c.rank();
    match mode {
        "kv" => kv(&mut c),
        "parent" => parent(&mut c, &args[1..]),
        "spawn-loop" => {
            // The launcher answers a fence from its event loop, which it
            // enters only after starting its own threads: counting before
            // that would count too few.
            c.fence().unwrap();
            if rank == 0 {
                spawn_loop(&mut c, arg(1).parse().unwrap());
            }
        }
        "spawn-time" => {
            if rank == 0 {
                spawn_time(&mut c, arg(1).parse().unwrap(), arg(2).parse().unwrap());
            }
        }
        "badauth" => {
            let addr = std::env::var("BATON_PMI_ADDR").unwrap();
            if rank == 0 {
                // `badauth N`: N tries with a wrong secret (default 1), then garbage.
                let tries: u32 = std::env::args().nth(2).map_or(1, |n| n.parse().unwrap());
                for _ in 0..tries {
                    let wrong = Secret::generate().unwrap();
                    let e = PmiClient::connect(&addr, &wrong, 0, c.job_id()).unwrap_err();
                    check(e.kind() == PmiErrorKind::Auth, "wrong secret refused");
                }
                let mut raw = TcpStream::connect(&addr).unwrap();
                raw.write_all(&[0xffu8; 64]).unwrap();
                // Wait for mpiexec to close it (its rejection), so the job does not end before
                // the rejection is counted.
                raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut sink = [0u8; 64];
                while matches!(raw.read(&mut sink), Ok(n) if n > 0) {}
            }
            kv(&mut c);
        }
        "abort" => {
            c.fence().unwrap();
            if rank == 1 {
                let code: i32 = arg(1).parse().unwrap();
                let e = c.abort(code, &arg(2));
                eprintln!("pmi_probe: abort returned {e:?}");
                exit(96);
            }
            std::thread::sleep(Duration::from_secs(30));
        }
        "nofinalize" => {
            c.fence().unwrap();
            if rank == 1 {
                exit(0);
            }
            std::thread::sleep(Duration::from_secs(30));
        }
        "late-exit" => {
            c.fence().unwrap();
            c.finalize().unwrap();
            if rank == 1 {
                exit(arg(1).parse().unwrap());
            }
            std::thread::sleep(Duration::from_millis(500));
            println!("rank {rank} done");
            return;
        }
        "selfkill" => {
            c.fence().unwrap();
            print_pid(&c);
            c.fence().unwrap();
            if rank == 1 {
                // SAFETY: signalling ourselves.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_secs(30));
        }
        "sleep" => {
            c.fence().unwrap();
            print_pid(&c);
            std::thread::sleep(Duration::from_secs(30));
        }
        _ => {
            eprintln!("pmi_probe: unknown mode '{mode}'");
            exit(2);
        }
    }
    c.finalize().unwrap();
}
