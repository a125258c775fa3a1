//! What the spawn tests share: running mpiexec and reading the probes' reports.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

pub const MPIEXEC: &str = env!("CARGO_BIN_EXE_mpiexec");

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

pub fn start(args: &[&str]) -> Run {
    let mut cmd = Command::new(MPIEXEC);
    cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let mut se = child.stderr.take().unwrap();
    let stderr = thread::spawn(move || {
        let mut s = String::new();
        se.read_to_string(&mut s).unwrap();
        s
    });
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
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                let elapsed = self.started.elapsed();
                return Done { code: st.code(), stdout: self.seen, stderr: self.stderr.join().unwrap(), elapsed };
            }
            if self.started.elapsed() > limit {
                let _ = self.child.kill();
                panic!("mpiexec did not finish within {limit:?}");
            }
            thread::sleep(Duration::from_millis(5));
        }
    }
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
