//! What the launcher's integration tests share: the `pmi_probe` example and this host's name,
//! running mpiexec ([`start`] and [`Run`] for a job read while it runs, [`collect`] for one read
//! at its end, both giving a [`Done`]), processes that must be gone, and the probes' reports
//! (`child job ...` lines, [`spawn_requests`] of `spawn-time`). Each test file uses a part of it.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

pub const MPIEXEC: &str = env!("CARGO_BIN_EXE_mpiexec");

/// The `pmi_probe` example, which the tests run as MPI processes.
pub fn probe() -> PathBuf {
    // Test binaries live in target/<profile>/deps; examples beside it.
    let exe = std::env::current_exe().unwrap();
    let p = exe.parent().unwrap().parent().unwrap().join("examples/pmi_probe");
    assert!(
        p.exists(),
        "{} is missing: build it with `cargo build -p baton-launch --examples` \
         (plain `cargo test` builds it)",
        p.display()
    );
    p
}

/// [`probe`] as a command-line argument.
pub fn probe_arg() -> String {
    probe().to_str().unwrap().to_owned()
}

pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its length.
    unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap();
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The CPUs this process may run on: mpiexec's universe without a host list (at least the job).
pub fn allowed_cpus() -> usize {
    // SAFETY: cpu_set_t is plain bits, and the call writes at most its size into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set), 0);
        libc::CPU_COUNT(&set) as usize
    }
}

/// Reads `r` to its end on a thread of its own (a pipe that must not fill while the test waits).
pub fn read_all(mut r: impl Read + Send + 'static) -> JoinHandle<String> {
    thread::spawn(move || {
        let mut s = String::new();
        r.read_to_string(&mut s).unwrap();
        s
    })
}

/// Waits for `child` to exit; past `limit` after `started` kills it and fails the test.
pub fn wait_limited(child: &mut Child, started: Instant, limit: Duration) -> ExitStatus {
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mpiexec did not finish within {limit:?}");
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Waits for `child` (started at `started`) within `limit` and gathers its output: its stdout
/// unless the test took it, and its stderr. `elapsed` counts from `started` to the exit.
pub fn collect(mut child: Child, started: Instant, limit: Duration) -> Done {
    let out = child.stdout.take().map(read_all);
    let err = read_all(child.stderr.take().unwrap());
    let status = wait_limited(&mut child, started, limit);
    let elapsed = started.elapsed();
    let stdout = out.map(|t| t.join().unwrap()).unwrap_or_default();
    Done { code: status.code(), stdout, stderr: err.join().unwrap(), elapsed }
}

/// Processes whose command line contains `pattern` (`pgrep -af`: pid and command line).
pub fn pgrep(pattern: &str) -> Vec<String> {
    let out = Command::new("pgrep").args(["-af", pattern]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

/// The lines of `s`, sorted (ranks print in any order).
pub fn sorted_lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.lines().map(str::to_owned).collect();
    v.sort();
    v
}

/// A running mpiexec whose stdout is read line by line.
pub struct Run {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub stdout: BufReader<ChildStdout>,
    pub seen: String,
    pub stderr: JoinHandle<String>,
    pub started: Instant,
}

pub struct Done {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

/// Starts mpiexec with `args`.
pub fn start(args: &[impl AsRef<OsStr>]) -> Run {
    let mut cmd = Command::new(MPIEXEC);
    cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let stderr = read_all(child.stderr.take().unwrap());
    let stdout = BufReader::new(child.stdout.take().unwrap());
    Run { stdin: child.stdin.take(), child, stdout, seen: String::new(), stderr, started }
}

impl Run {
    /// Reads stdout until `n` lines starting with `prefix` have been seen.
    pub fn wait_lines(&mut self, prefix: &str, n: usize) -> Vec<String> {
        loop {
            let got: Vec<String> = self.seen.lines().filter(|l| l.starts_with(prefix)).map(str::to_owned).collect();
            if got.len() >= n {
                return got;
            }
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "mpiexec ended early; output so far:\n{}",
                self.seen
            );
            self.seen.push_str(&line);
        }
    }

    pub fn send_line(&mut self) {
        let mut pipe = self.stdin.take().unwrap();
        pipe.write_all(b"go\n").unwrap();
    }

    pub fn finish(mut self, limit: Duration) -> Done {
        self.stdin.take();
        self.stdout.read_to_string(&mut self.seen).unwrap();
        let st = wait_limited(&mut self.child, self.started, limit);
        let elapsed = self.started.elapsed();
        Done { code: st.code(), stdout: self.seen, stderr: self.stderr.join().unwrap(), elapsed }
    }

    /// Kills rank 1 of a spawned job of two (`child-sleep` children, each printing `child rank
    /// R ... PID`) and waits until both are gone (mpiexec ends the rest of the job). Returns the
    /// killed pid.
    pub fn kill_spawned_rank_1(&mut self) -> i32 {
        let lines = self.wait_lines("child rank ", 2);
        let kids = pid_lines(&lines);
        // The two lines come in either order.
        let victim = pid_lines(&lines.into_iter().filter(|l| l.starts_with("child rank 1 ")).collect::<Vec<_>>())[0];
        // SAFETY: the process was started by this test's mpiexec.
        unsafe { libc::kill(victim, libc::SIGKILL) };
        // The rest of the spawned job goes (SIGTERM), the parent stays.
        assert_all_gone(&kids, Duration::from_secs(2));
        victim
    }
}

/// Kills rank 1 of the spawned job that runs on `host` (see [`Run::kill_spawned_rank_1`]),
/// lets the parent go on and checks that the job still ends well, mpiexec having reported only
/// the killed rank. Gives the job's output, for what the parent did afterwards.
pub fn finish_after_spawned_rank_killed(mut r: Run, host: &str, limit: Duration) -> Done {
    let victim = r.kill_spawned_rank_1();
    r.send_line();
    let o = r.finish(limit);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(
        o.stderr,
        format!("mpiexec: spawned job 1: rank 1 (pid {victim} on {host}) was killed by signal 9 (Killed)\n")
    );
    o
}

/// Checks the end of a `pmi_probe spawn-loop` job: it ran well, and the launcher it measured
/// (`who`: mpiexec, or the proxy of its host) holds no more descriptors or threads than before.
pub fn assert_spawn_loop_left_nothing(o: &Done, who: &str) {
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let line = o.stdout.lines().find(|l| l.starts_with("loop ")).expect("loop report");
    let n: Vec<usize> = line.split(' ').filter_map(|w| w.parse().ok()).collect();
    let (fds, threads) = ((n[1], n[2], n[3]), (n[4], n[5], n[6]));
    eprintln!("spawn loop in {:?}: {who}'s fds before/peak/after {fds:?}, threads {threads:?}", o.elapsed);
    assert!(fds.2 <= fds.0, "{who}'s descriptors grew: {line}");
    assert!(threads.2 <= threads.0, "{who}'s threads grew: {line}");
}

/// Checks the end of a job whose spawned job 2 called `MPI_Abort(7, "boom")`: mpiexec's exit
/// code and message, and every spawned process that said who it is gone within `limit`.
pub fn assert_spawned_abort(o: &Done, limit: Duration) {
    assert_eq!(o.code, Some(7), "{}", o.stderr);
    assert!(o.stderr.starts_with("mpiexec: spawned job 2: rank "), "{}", o.stderr);
    assert!(o.stderr.ends_with(" aborted the job (code 7): boom\n"), "{}", o.stderr);
    // Under load the abort may come before the sleeper has said who it is.
    let said: Vec<String> = o.stdout.lines().filter(|l| l.starts_with("child rank ")).map(str::to_owned).collect();
    assert_all_gone(&pid_lines(&said), limit);
}

/// mpiexec's arguments for `pmi_probe parent` with the spawn `steps`, after the launcher's
/// `flags`.
pub fn parent_args(flags: &[&str], steps: &[&str]) -> Vec<String> {
    let probe = probe_arg();
    flags.iter().copied().chain([probe.as_str(), "parent"]).chain(steps.iter().copied()).map(str::to_owned).collect()
}

/// Alive and not a zombie.
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit_once(") ").and_then(|(_, r)| r.chars().next());
            !matches!(state, Some('Z') | Some('X') | None)
        }
        Err(_) => false,
    }
}

pub fn assert_all_gone(pids: &[i32], limit: Duration) {
    let start = Instant::now();
    loop {
        let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() {
            return;
        }
        if start.elapsed() > limit {
            for &p in &left {
                // SAFETY: cleaning up processes this test started.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
            panic!("processes {left:?} outlived their job");
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// `key value` pairs of a probe's `child job ...` report.
pub fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let words: Vec<&str> = line.split(' ').collect();
    let i = words.iter().position(|w| *w == key).unwrap_or_else(|| panic!("no {key} in {line}"));
    words.get(i + 1).copied().unwrap_or("")
}

pub fn reports(stdout: &str) -> Vec<&str> {
    let mut v: Vec<&str> = stdout.lines().filter(|l| l.starts_with("child job ")).collect();
    v.sort_by_key(|l| (field(l, "port").to_owned(), field(l, "rank").parse::<u32>().unwrap()));
    v
}

pub fn pid_lines(lines: &[String]) -> Vec<i32> {
    lines.iter().map(|l| l.rsplit(' ').next().unwrap().parse().unwrap()).collect()
}

/// One request of the probe's `spawn-time` step: when it was made and answered, and when each
/// child it started was running (nanoseconds of the monotonic clock all processes share).
pub struct SpawnRequest {
    pub asked: u128,
    pub answered: u128,
    pub starts: Vec<u128>,
}

impl SpawnRequest {
    /// Microseconds from the request to its last child running, and to the answer.
    pub fn latency(&self) -> (u128, u128) {
        let last = self.starts.iter().copied().max().unwrap();
        (last.saturating_sub(self.asked) / 1000, (self.answered - self.asked) / 1000)
    }
}

/// The `request ID ASKED ANSWERED` lines of a `spawn-time` run, each with the `started ID ...
/// TIME` lines of its children.
pub fn spawn_requests(stdout: &str) -> Vec<SpawnRequest> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("request "))
        .map(|req| {
            let w: Vec<&str> = req.split(' ').collect();
            let starts = stdout
                .lines()
                .filter_map(|l| l.strip_prefix("started "))
                .filter(|l| l.split(' ').next() == Some(w[0]))
                .map(|l| l.rsplit(' ').next().unwrap().parse::<u128>().unwrap())
                .collect();
            SpawnRequest { asked: w[1].parse().unwrap(), answered: w[2].parse().unwrap(), starts }
        })
        .collect()
}
