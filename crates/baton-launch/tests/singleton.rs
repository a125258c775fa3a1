//! `mpiexec --singleton-server`: `pmi_probe singleton-server MPIEXEC ...`
//! plays an MPI program started without mpiexec, starting mpiexec the way
//! the MPI library does and spawning through it.
//!
//! Some tests kill the singleton or let it exit first; mpiexec (its child)
//! is then reparented to this test process, which makes itself a child
//! subreaper so that it can collect mpiexec's exit status.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

mod common;
use common::{alive, field, hostname, probe, read_all, MPIEXEC};

/// A running singleton probe; its stdout (shared with mpiexec and the
/// spawned processes) arrives line by line.
struct Singleton {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    stderr: JoinHandle<String>,
    started: Instant,
}

struct Done {
    code: Option<i32>,
    stdout: Vec<String>,
    stderr: String,
    elapsed: Duration,
}

fn start(steps: &[&str], env: &[(&str, &str)]) -> Singleton {
    let mut cmd = Command::new(probe());
    cmd.arg("singleton-server").arg(MPIEXEC).args(steps);
    cmd.env_remove("BATON_UNIVERSE_SIZE").envs(env.iter().copied());
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let (tx, lines) = mpsc::channel();
    thread::spawn(move || {
        for line in out.lines() {
            if tx.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    let stderr = read_all(child.stderr.take().unwrap());
    Singleton { stdin: child.stdin.take(), child, lines, seen: Vec::new(), stderr, started }
}

impl Singleton {
    /// Waits (at most 10 s) for `n` lines starting with `prefix`.
    fn wait_lines(&mut self, prefix: &str, n: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let got: Vec<String> = self.seen.iter().filter(|l| l.starts_with(prefix)).cloned().collect();
            if got.len() >= n {
                return got;
            }
            match self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => self.seen.push(line),
                Err(_) => panic!("no {n} lines '{prefix}...' within 10 s; output so far:\n{}", self.seen.join("\n")),
            }
        }
    }

    /// Lets a `wait-stdin` step go on.
    fn send_line(&mut self) {
        self.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    }

    fn mpiexec_pid(&mut self) -> i32 {
        last_number(&self.wait_lines("mpiexec pid ", 1)[0])
    }

    /// Waits for the probe to exit, then for its output to end (when
    /// mpiexec and everything it started have closed it too).
    fn finish(mut self, limit: Duration) -> Done {
        self.stdin.take();
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            if self.started.elapsed() > limit {
                let _ = self.child.kill();
                panic!("the singleton did not finish within {limit:?}; output:\n{}", self.seen.join("\n"));
            }
            thread::sleep(Duration::from_millis(5));
        };
        let elapsed = self.started.elapsed();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => self.seen.push(line),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => panic!("output still open 10 s after the singleton ended"),
            }
        }
        Done { code: status.code(), stdout: self.seen, stderr: self.stderr.join().unwrap(), elapsed }
    }
}

fn last_number(line: &str) -> i32 {
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

fn reports(stdout: &[String]) -> Vec<&str> {
    let mut v: Vec<&str> = stdout.iter().filter(|l| l.starts_with("child job ")).map(String::as_str).collect();
    v.sort_by_key(|l| field(l, "rank").parse::<u32>().unwrap());
    v
}

fn assert_gone(pids: &[i32]) {
    let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    for &p in &left {
        // SAFETY: cleaning up processes this test started.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    assert!(left.is_empty(), "processes {left:?} outlived mpiexec");
}

fn become_subreaper() {
    // SAFETY: prctl with integer arguments; affects only this process.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) };
    assert_eq!(rc, 0, "PR_SET_CHILD_SUBREAPER");
}

/// Reaps `pid`, a grandchild that becomes our child once its parent is
/// gone; its exit code (128+signal if killed), or a panic after `limit`.
fn reap_orphan(pid: i32, limit: Duration) -> i32 {
    let deadline = Instant::now() + limit;
    loop {
        let mut status = 0;
        // SAFETY: status is a valid out-pointer. ECHILD (-1) until the
        // process has been reparented to us, 0 while it runs.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if rc == pid {
            return if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 128 + libc::WTERMSIG(status) };
        }
        if Instant::now() > deadline {
            // SAFETY: the test's own mpiexec.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("mpiexec {pid} did not exit within {limit:?}");
        }
        thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_singleton_spawns_two_children_and_finalizes() {
    let o = start(&["spawn:self|2||child", "finalize", "wait-mpiexec"], &[]).finish(Duration::from_secs(10));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(o.stderr, "");
    assert!(o.stdout.iter().any(|l| l == "mpiexec status 0"), "{:?}", o.stdout);
    let job = o.stdout.iter().find_map(|l| l.strip_prefix("spawned job ")).unwrap();
    let (job, size) = job.split_once(" size ").unwrap();
    assert_eq!(size, "2");
    let r = reports(&o.stdout);
    assert_eq!(r.len(), 2, "{:?}", o.stdout);
    let host = hostname();
    for (rank, line) in r.iter().enumerate() {
        assert_eq!((field(line, "job"), field(line, "rank"), field(line, "size")), (job, &*rank.to_string(), "2"));
        assert_eq!((field(line, "port"), field(line, "universe"), field(line, "node")), ("port-0", "1", &*host));
    }
    assert_gone(&r.iter().map(|l| field(l, "pid").parse().unwrap()).collect::<Vec<i32>>());
    eprintln!("singleton, mpiexec and two children: {:?}", o.elapsed);
}

#[test]
fn mpiexec_waits_for_spawned_jobs_after_the_singleton_finalized() {
    // The singleton waits for mpiexec in its finalize (as the library may).
    let o = start(&["spawn:self|1||child-linger", "finalize", "wait-mpiexec"], &[]).finish(Duration::from_secs(10));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let lingered = o.stdout.iter().position(|l| l.starts_with("lingered pid ")).expect("the child finished");
    let status = o.stdout.iter().position(|l| l == "mpiexec status 0").expect("mpiexec status 0");
    assert!(lingered < status, "{:?}", o.stdout);
    // Or exits at once, leaving mpiexec to finish the job alone.
    become_subreaper();
    let mut s = start(&["spawn:self|1||child-linger", "finalize"], &[]);
    let mpiexec = s.mpiexec_pid();
    let o = s.finish(Duration::from_secs(10));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(reap_orphan(mpiexec, Duration::from_secs(5)), 0);
    assert!(o.stdout.iter().any(|l| l.starts_with("lingered pid ")), "{:?}", o.stdout);
    assert_eq!(o.stderr, "");
}

#[test]
fn killing_the_singleton_ends_its_spawned_jobs() {
    become_subreaper();
    let mut s = start(&["spawn:self|2||child-sleep", "sleep:30"], &[]);
    let mpiexec = s.mpiexec_pid();
    let kids: Vec<i32> = s.wait_lines("child rank ", 2).iter().map(|l| last_number(l)).collect();
    let singleton = s.child.id() as i32;
    let killed = Instant::now();
    // SAFETY: the probe this test started.
    unsafe { libc::kill(singleton, libc::SIGKILL) };
    let status = reap_orphan(mpiexec, Duration::from_secs(3));
    let took = killed.elapsed();
    assert_gone(&kids);
    let o = s.finish(Duration::from_secs(10));
    assert_eq!(status, 1, "{}", o.stderr);
    assert_eq!(
        o.stderr,
        format!("mpiexec: the singleton process {singleton} ended without MPI_Finalize; ending the jobs it spawned\n")
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
    eprintln!("singleton killed -> mpiexec and children gone: {took:?}");
}

#[test]
fn a_singleton_closing_its_connection_unfinalized_ends_its_spawned_jobs() {
    let steps = ["leak-fd", "spawn:self|2||child-sleep", "wait-stdin", "count-leaks", "disconnect", "wait-mpiexec"];
    let mut s = start(&steps, &[]);
    let singleton = s.child.id();
    let kids: Vec<i32> = s.wait_lines("child rank ", 2).iter().map(|l| last_number(l)).collect();
    s.send_line();
    let o = s.finish(Duration::from_secs(5));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(o.stdout.iter().any(|l| l == "mpiexec status 1"), "{:?}", o.stdout);
    // What the singleton left inheritable stays with the singleton.
    assert!(o.stdout.iter().any(|l| l == "leaks 0 in 3 processes"), "{:?}", o.stdout);
    assert_gone(&kids);
    assert_eq!(
        o.stderr,
        format!(
            "mpiexec: the singleton process {singleton} closed its bootstrap connection without MPI_Finalize; \
             ending the jobs it spawned\n"
        )
    );
}

#[test]
fn abort_ends_the_spawned_jobs_but_never_the_singleton() {
    // From the singleton: it is answered, and left to end by itself.
    let mut s = start(&["spawn:self|1||child-sleep", "wait-stdin", "abort:7", "wait-mpiexec"], &[]);
    let kids: Vec<i32> = s.wait_lines("child rank ", 1).iter().map(|l| last_number(l)).collect();
    let aborted = Instant::now();
    s.send_line();
    let o = s.finish(Duration::from_secs(5));
    let took = aborted.elapsed();
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(o.stdout.iter().any(|l| l == "mpiexec status 7"), "{:?}", o.stdout);
    assert_gone(&kids);
    assert_eq!(o.stderr, "mpiexec: rank 0 aborted the job (code 7): singleton gives up\n");
    // Not held up (up to 1 s) once the singleton has let go.
    assert!(took < Duration::from_millis(900), "{took:?}");
    // From a spawned job.
    let o = start(&["spawn:self|1||child-abort", "wait-mpiexec"], &[]).finish(Duration::from_secs(5));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(o.stdout.iter().any(|l| l == "mpiexec status 7"), "{:?}", o.stdout);
    assert_eq!(o.stderr, "mpiexec: spawned job 1: rank 0 aborted the job (code 7): boom\n");
}

#[test]
fn universe_size_comes_from_the_environment() {
    let o = start(&["spawn:self|1||child", "finalize", "wait-mpiexec"], &[("BATON_UNIVERSE_SIZE", "6")])
        .finish(Duration::from_secs(10));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let r = reports(&o.stdout);
    assert_eq!(r.len(), 1, "{:?}", o.stdout);
    assert_eq!(field(r[0], "universe"), "6");
}

#[test]
fn bad_starts_are_refused_clearly() {
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 5] = [
        (&["secret:0123garbage"], &[], "malformed job secret on stdin (expected 64 hex digits and a newline)"),
        (&["no-addr-fd"], &[], "descriptor 3 is not open: the MPI library passes a pipe there for the address"),
        (&["pid:999999999"], &[], "there is no process 999999999"),
        (&["pid:-5"], &[], "PID '-5' is not a process id"),
        (&[], &[("BATON_UNIVERSE_SIZE", "0")], "BATON_UNIVERSE_SIZE=\"0\" is not a positive number"),
    ];
    for (steps, env, want) in cases {
        let steps: Vec<&str> = steps.iter().copied().chain(["wait-mpiexec"]).collect();
        let o = start(&steps, env).finish(Duration::from_secs(15));
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        let tail: Vec<&str> = o.stdout.iter().skip(1).map(String::as_str).collect();
        assert_eq!(tail, ["no address", "mpiexec status 2"], "{steps:?}: {}", o.stderr);
        assert!(o.stderr.starts_with(&format!("mpiexec --singleton-server: {want}")), "{steps:?}: {}", o.stderr);
        assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    }
    let o = Command::new(MPIEXEC).args(["--singleton-server", "12"]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("usage: mpiexec --singleton-server JOB_ID PID"));
    // An internal mode: not offered to users.
    let help = Command::new(MPIEXEC).arg("--help").output().unwrap();
    assert!(!String::from_utf8_lossy(&help.stdout).contains("singleton"));
}
