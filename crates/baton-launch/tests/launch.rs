//! End-to-end tests: run the built `mpiexec` on shell commands and on the
//! `pmi_probe` example, and check exit statuses, messages, output and that
//! no process of a job outlives it.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

mod common;
use common::{alive, collect, hostname, probe, read_all, sorted_lines, wait_limited, Done, MPIEXEC};

fn mpiexec_with(args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Done {
    let mut cmd = Command::new(MPIEXEC);
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    for (k, v) in env {
        cmd.env(k, v);
    }
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap();
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        let text = text.to_owned();
        thread::spawn(move || {
            let _ = pipe.write_all(text.as_bytes());
        });
    }
    collect(child, start, Duration::from_secs(20))
}

fn mpiexec(args: &[&str]) -> Done {
    mpiexec_with(args, None, &[])
}

fn wait_all_gone(pids: &[i32], limit: Duration) -> Result<Duration, Vec<i32>> {
    let start = Instant::now();
    loop {
        let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() {
            return Ok(start.elapsed());
        }
        if start.elapsed() > limit {
            return Err(left);
        }
        thread::sleep(Duration::from_millis(10));
    }
}

fn pids_in(stdout: &str) -> Vec<i32> {
    stdout.lines().filter_map(|l| l.split_once(" pid ").map(|(_, p)| p.trim().parse().unwrap())).collect()
}

/// Starts mpiexec with `args`, its stdout piped, its stderr as given.
fn spawn_mpiexec(args: &[&str], stderr: Stdio) -> Child {
    Command::new(MPIEXEC).args(args).stdout(Stdio::piped()).stderr(stderr).spawn().unwrap()
}

/// Reads `child`'s stdout until `n` pids are out (lines `... pid N`), failing if it ends first.
/// Returns the output read and the reader, which keeps the pipe open while the test goes on.
fn read_pids(child: &mut Child, n: usize) -> (String, BufReader<ChildStdout>) {
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut out = String::new();
    while pids_in(&out).len() < n {
        assert!(reader.read_line(&mut out).unwrap() > 0, "mpiexec ended early; output so far:\n{out}");
    }
    (out, reader)
}

// ---------------------------------------------------------------- CLI

#[test]
fn version_help_and_unknown_flags() {
    let o = mpiexec(&["--version"]);
    assert_eq!(o.code, Some(0));
    assert_eq!(o.stdout.trim(), "Baton mpiexec 0.1.0");
    let o = mpiexec(&["--help"]);
    assert_eq!(o.code, Some(0));
    for flag in [
        "-n N",
        "-np",
        "-env",
        "-genv",
        "-x NAME",
        "-wdir",
        "-cwd",
        "-l",
        "--tag-output",
        "--timeout",
        "-hosts",
        "-hostfile",
        "--version",
    ] {
        assert!(o.stdout.contains(flag), "help lacks {flag}");
    }
    let o = mpiexec(&["--frobnicate", "-n", "1", "true"]);
    assert_eq!(o.code, Some(2));
    assert!(o.stderr.contains("unknown option '--frobnicate'"), "{}", o.stderr);
    let o = mpiexec(&["-n", "2"]);
    assert_eq!(o.code, Some(2));
}

#[test]
fn mpirun_name_behaves_the_same() {
    let dir = std::env::temp_dir().join(format!("baton-mpirun-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("mpirun");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(MPIEXEC, &link).unwrap();
    let out = Command::new(&link).args(["-np", "2", "echo", "hi"]).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\nhi\n");
}

#[test]
fn hosts_naming_this_machine_run_locally() {
    let o = mpiexec(&["-hosts", "localhost", "-n", "1", "true"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let o = mpiexec(&["-host", &hostname(), "-n", "2", "sh", "-c", "echo $BATON_NODE"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(o.stdout, format!("{0}\n{0}\n", hostname()));
    let hf = std::env::temp_dir().join(format!("baton-hosts-{}", std::process::id()));
    std::fs::write(&hf, "# comment\nlocalhost slots=4\nlocalhost bogus=1\n").unwrap();
    let o = mpiexec(&["-hostfile", hf.to_str().unwrap(), "-n", "1", "true"]);
    std::fs::remove_file(&hf).unwrap();
    assert_eq!(o.code, Some(2));
    assert!(o.stderr.contains(":3: unknown word 'bogus=1'"), "{}", o.stderr);
}

// ------------------------------------------------------ plain programs

#[test]
fn non_mpi_programs_run_and_exit_codes_propagate() {
    let o = mpiexec(&["-n", "3", "echo", "hello"]);
    assert_eq!(o.code, Some(0));
    assert_eq!(o.stdout, "hello\nhello\nhello\n");

    let o = mpiexec(&["-n", "2", "sh", "-c", "exit 3"]);
    assert_eq!(o.code, Some(3));
    assert!(o.stderr.contains("exited with status 3"), "{}", o.stderr);
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);

    // Oversubscription is fine.
    let o = mpiexec(&["-n", "12", "true"]);
    assert_eq!(o.code, Some(0));
}

#[test]
fn missing_executable_is_reported() {
    let o = mpiexec(&["-n", "2", "/nonexistent/baton-prog"]);
    assert_eq!(o.code, Some(127));
    assert!(
        o.stderr.contains("mpiexec: cannot run '/nonexistent/baton-prog': No such file or directory"),
        "{}",
        o.stderr
    );
    let o = mpiexec(&["-n", "1", "baton-no-such-program-anywhere"]);
    assert_eq!(o.code, Some(127));
}

#[test]
fn output_forwarding_with_and_without_rank_prefix() {
    let script = "echo out$BATON_RANK; echo err$BATON_RANK >&2";
    let o = mpiexec(&["-n", "2", "sh", "-c", script]);
    assert_eq!(sorted_lines(&o.stdout), ["out0", "out1"]);
    assert_eq!(sorted_lines(&o.stderr), ["err0", "err1"]);
    for flag in ["-l", "-prepend-rank", "--tag-output"] {
        let o = mpiexec(&[flag, "-n", "2", "sh", "-c", script]);
        assert_eq!(sorted_lines(&o.stdout), ["[0] out0", "[1] out1"], "{flag}");
        assert_eq!(sorted_lines(&o.stderr), ["[0] err0", "[1] err1"], "{flag}");
    }
}

#[test]
fn long_lines_are_never_interleaved() {
    // 200 kB lines are bigger than a pipe buffer, so they arrive in pieces.
    let o = mpiexec(&["-l", "-n", "3", "sh", "-c", "printf \"%0200000d\\n\" 0; printf \"%0200000d\\n\" 0"]);
    assert_eq!(o.code, Some(0));
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 6);
    for l in lines {
        let (prefix, body) = l.split_at(4);
        assert!(matches!(prefix, "[0] " | "[1] " | "[2] "), "{prefix}");
        assert_eq!(body.len(), 200_000);
        assert!(body.bytes().all(|b| b == b'0'));
    }
}

#[test]
fn output_is_flushed_promptly() {
    let mut child = spawn_mpiexec(&["-l", "-n", "1", "sh", "-c", "echo early; sleep 5"], Stdio::null());
    let start = Instant::now();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line, "[0] early\n");
    assert!(start.elapsed() < Duration::from_secs(3));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = wait_limited(&mut child, Instant::now(), Duration::from_secs(5));
    assert_eq!(st.code(), Some(128 + libc::SIGTERM));
}

#[test]
fn environment_flags() {
    let o = mpiexec_with(
        &[
            "-genv",
            "GA",
            "1",
            "-x",
            "XB=2",
            "-x",
            "PASSME",
            "-env",
            "LC",
            "3",
            "-n",
            "1",
            "sh",
            "-c",
            "echo $GA-$XB-$PASSME-$LC",
        ],
        None,
        &[("PASSME", "p")],
    );
    assert_eq!(o.stdout, "1-2-p-3\n", "{}", o.stderr);
    let o = mpiexec(&[
        "-n",
        "2",
        "sh",
        "-c",
        "echo $BATON_RANK $BATON_SIZE $BATON_LOCAL_RANK $BATON_LOCAL_SIZE $BATON_UNIVERSE_SIZE \
         ${BATON_PMI_ADDR%:*} ${#BATON_PMI_SECRET}; readlink /proc/$$/fd/$BATON_SHM_FD",
    ]);
    let lines = sorted_lines(&o.stdout);
    assert_eq!(lines.len(), 4, "{}", o.stdout);
    // The universe is this host's CPUs, at least the job.
    let universe = common::allowed_cpus().max(2);
    assert!(lines.contains(&format!("0 2 0 2 {universe} 127.0.0.1 64")), "{lines:?}");
    assert!(lines.contains(&format!("1 2 1 2 {universe} 127.0.0.1 64")), "{lines:?}");
    let memfds: Vec<_> = lines.iter().filter(|l| l.starts_with("/memfd:baton-shm-")).collect();
    assert_eq!(memfds.len(), 2, "{lines:?}");
    assert_eq!(memfds[0], memfds[1], "both ranks share one memfd");
}

#[test]
fn working_directory() {
    let dir = std::env::temp_dir().canonicalize().unwrap();
    for flag in ["-wdir", "--wdir", "-cwd"] {
        let o = mpiexec(&[flag, dir.to_str().unwrap(), "-n", "1", "pwd"]);
        assert_eq!(o.stdout.trim(), dir.to_str().unwrap(), "{flag}");
    }
    let o = mpiexec(&["-wdir", "/nonexistent/dir", "-n", "1", "pwd"]);
    assert_ne!(o.code, Some(0));
    assert!(o.stderr.contains("/nonexistent/dir"), "{}", o.stderr);
}

#[test]
fn mpmd_numbers_ranks_across_commands() {
    let o = mpiexec(&[
        "-n",
        "2",
        "sh",
        "-c",
        "echo A $BATON_RANK $BATON_APPNUM $BATON_SIZE",
        ":",
        "-n",
        "3",
        "sh",
        "-c",
        "echo B $BATON_RANK $BATON_APPNUM $BATON_SIZE",
    ]);
    assert_eq!(o.code, Some(0));
    assert_eq!(sorted_lines(&o.stdout), ["A 0 0 5", "A 1 0 5", "B 2 1 5", "B 3 1 5", "B 4 1 5"]);
}

#[test]
fn stdin_goes_to_rank_zero_only() {
    let o = mpiexec_with(&["-l", "-n", "2", "sh", "-c", "cat; echo end"], Some("line one\nline two\n"), &[]);
    assert_eq!(o.code, Some(0));
    assert_eq!(sorted_lines(&o.stdout), ["[0] end", "[0] line one", "[0] line two", "[1] end"]);
}

// ------------------------------------------------------ failures and time

#[test]
fn rank_killed_by_signal_ends_the_job() {
    let o = mpiexec(&[
        "-n",
        "3",
        "sh",
        "-c",
        "echo sh pid $$; if [ $BATON_RANK = 1 ]; then sleep 0.2; kill -9 $$; fi; exec sleep 30",
    ]);
    assert_eq!(o.code, Some(128 + 9));
    assert!(o.elapsed < Duration::from_secs(3), "{:?}", o.elapsed);
    let pids = pids_in(&o.stdout);
    assert_eq!(pids.len(), 3);
    let line = o.stderr.trim();
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    assert!(line.starts_with("mpiexec: rank 1 (pid "), "{line}");
    assert!(line.ends_with(&format!(" on {}) was killed by signal 9 (Killed)", hostname())), "{line}");
    let named: i32 = line["mpiexec: rank 1 (pid ".len()..].split(' ').next().unwrap().parse().unwrap();
    assert!(pids.contains(&named));
    wait_all_gone(&pids, Duration::from_millis(200)).expect("ranks left behind");
}

#[test]
fn mpi_rank_sigkill_ends_the_job_within_two_seconds() {
    let p = probe();
    let mut child = spawn_mpiexec(&["-n", "4", p.to_str().unwrap(), "selfkill"], Stdio::piped());
    let err_reader = read_all(child.stderr.take().unwrap());
    // Rank 1 kills itself right after all four pids are out.
    let (stdout, _reader) = read_pids(&mut child, 4);
    let waited = Instant::now();
    let status = wait_limited(&mut child, waited, Duration::from_secs(10));
    let took = waited.elapsed();
    assert!(took < Duration::from_secs(2), "job took {took:?} to end");
    assert_eq!(status.code(), Some(137));
    let pids = pids_in(&stdout);
    let stderr = err_reader.join().unwrap();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    let line = lines[0];
    let rank1 = stdout.lines().find_map(|l| l.strip_prefix("rank 1 pid ")).unwrap();
    assert_eq!(line, format!("mpiexec: rank 1 (pid {rank1} on {}) was killed by signal 9 (Killed)", hostname()));
    wait_all_gone(&pids, Duration::from_millis(200)).expect("ranks left behind");
}

#[test]
fn ranks_die_when_mpiexec_is_sigkilled() {
    let p = probe();
    let mut child = spawn_mpiexec(&["-n", "3", p.to_str().unwrap(), "sleep"], Stdio::null());
    let (out, _reader) = read_pids(&mut child, 3);
    let pids = pids_in(&out);
    assert!(pids.iter().all(|&p| alive(p)));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    if let Err(left) = wait_all_gone(&pids, Duration::from_millis(1500)) {
        for p in &left {
            // SAFETY: cleaning up processes this test started.
            unsafe { libc::kill(*p, libc::SIGKILL) };
        }
        panic!("ranks {left:?} survived mpiexec's death");
    }
}

#[test]
fn timeout_flag_and_environment() {
    let o = mpiexec(&["--timeout", "1", "-n", "2", "sleep", "30"]);
    assert_eq!(o.code, Some(124));
    assert!(o.elapsed < Duration::from_secs(4), "{:?}", o.elapsed);
    assert!(o.stderr.contains("timeout"), "{}", o.stderr);
    let o = mpiexec_with(&["-n", "2", "sleep", "30"], None, &[("MPIEXEC_TIMEOUT", "1")]);
    assert_eq!(o.code, Some(124));
    assert!(o.elapsed < Duration::from_secs(4), "{:?}", o.elapsed);
    // A job that finishes in time is unaffected.
    let o = mpiexec(&["--timeout", "10", "-n", "2", "true"]);
    assert_eq!(o.code, Some(0));
}

#[test]
fn signals_are_forwarded_then_escalated() {
    // Ranks that ignore SIGTERM get SIGKILLed about a second later.
    let script = "trap '' TERM; echo sh pid $$; exec sleep 30";
    let mut child = spawn_mpiexec(&["-n", "2", "sh", "-c", script], Stdio::null());
    let (out, _reader) = read_pids(&mut child, 2);
    let pids = pids_in(&out);
    let start = Instant::now();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = wait_limited(&mut child, Instant::now(), Duration::from_secs(5));
    assert_eq!(st.code(), Some(128 + libc::SIGTERM));
    assert!(start.elapsed() < Duration::from_secs(3));
    wait_all_gone(&pids, Duration::from_millis(200)).expect("ranks left behind");

    // Ranks that honour SIGINT end at once.
    let mut child = spawn_mpiexec(&["-n", "2", "sh", "-c", "echo ready; exec sleep 30"], Stdio::null());
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let waited = Instant::now();
    let st = wait_limited(&mut child, waited, Duration::from_secs(5));
    let took = waited.elapsed();
    assert_eq!(st.code(), Some(128 + libc::SIGINT));
    assert!(took < Duration::from_millis(900), "{took:?}");
}

// ------------------------------------------------------ bootstrap (PMI)

#[test]
fn put_fence_get_across_ranks() {
    let p = probe();
    let o = mpiexec(&["-n", "8", p.to_str().unwrap(), "kv"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let universe = common::allowed_cpus().max(8);
    let expected: Vec<String> = (0..8).map(|r| format!("rank {r} of 8 ok appnum 0 universe {universe}")).collect();
    assert_eq!(sorted_lines(&o.stdout), expected);
    // Bootstrap of 8 ranks costs milliseconds, not seconds.
    assert!(o.elapsed < Duration::from_secs(3), "{:?}", o.elapsed);
}

#[test]
fn mpmd_probe_sees_appnum() {
    let p = probe();
    let p = p.to_str().unwrap();
    let o = mpiexec(&["-n", "1", p, "kv", ":", "-n", "2", p, "kv"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let u = common::allowed_cpus().max(3);
    assert_eq!(
        sorted_lines(&o.stdout),
        [
            format!("rank 0 of 3 ok appnum 0 universe {u}"),
            format!("rank 1 of 3 ok appnum 1 universe {u}"),
            format!("rank 2 of 3 ok appnum 1 universe {u}"),
        ]
    );
}

#[test]
fn singleton_without_mpiexec() {
    let out = Command::new(probe()).arg("singleton").env_remove("BATON_PMI_ADDR").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "singleton\n");
}

#[test]
fn wrong_secret_is_rejected_while_the_job_completes() {
    let p = probe();
    let o = mpiexec(&["-n", "3", p.to_str().unwrap(), "badauth"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(o.stdout.lines().count(), 3, "{}", o.stdout);
    let rejected: Vec<&str> = o.stderr.lines().filter(|l| l.contains("rejected")).collect();
    assert_eq!(rejected.len(), 2, "{}", o.stderr);
    assert!(rejected[0].starts_with("mpiexec: rejected an unauthenticated bootstrap connection from 127.0.0.1:"));
    assert!(rejected[0].ends_with("(more from 127.0.0.1 are counted, not shown)"), "{}", o.stderr);
    assert_eq!(rejected[1], "mpiexec: rejected 2 unauthenticated connections from 127.0.0.1 in all");
}

#[test]
fn a_stream_of_wrong_secrets_is_logged_once_with_counts() {
    let p = probe();
    // 120 wrong secrets and one garbage connection, from one address.
    let o = mpiexec(&["-n", "2", p.to_str().unwrap(), "badauth", "120"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(o.stdout.lines().count(), 2, "{}", o.stdout);
    let lines: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(lines.len(), 4, "{}", o.stderr);
    assert!(lines[0].starts_with("mpiexec: rejected an unauthenticated bootstrap connection from 127.0.0.1:"));
    assert_eq!(lines[1], "mpiexec: rejected 10 unauthenticated connections from 127.0.0.1 so far");
    assert_eq!(lines[2], "mpiexec: rejected 100 unauthenticated connections from 127.0.0.1 so far");
    assert_eq!(lines[3], "mpiexec: rejected 121 unauthenticated connections from 127.0.0.1 in all");
}

#[test]
fn abort_prints_once_and_uses_the_code() {
    let p = probe();
    let o = mpiexec(&["-n", "3", p.to_str().unwrap(), "abort", "7", "giving up now"]);
    assert_eq!(o.code, Some(7), "{}", o.stderr);
    assert_eq!(o.stderr.matches("giving up now").count(), 1, "{}", o.stderr);
    assert!(o.stderr.contains("rank 1"), "{}", o.stderr);
    assert!(o.elapsed < Duration::from_secs(3), "{:?}", o.elapsed);
    // The code as a shell sees an exit status, a non-zero one never success.
    for (code, status) in [("-1", 255), ("300", 44), ("256", 1), ("0", 0)] {
        let o = mpiexec(&["-n", "2", p.to_str().unwrap(), "abort", code, "bye"]);
        assert_eq!(o.code, Some(status), "MPI_Abort code {code}: {}", o.stderr);
        assert!(o.stderr.contains(&format!("aborted the job (code {code}): bye")), "{}", o.stderr);
    }
}

#[test]
fn exit_without_finalize_ends_the_job() {
    let p = probe();
    let o = mpiexec(&["-n", "3", p.to_str().unwrap(), "nofinalize"]);
    assert_ne!(o.code, Some(0));
    assert!(o.elapsed < Duration::from_secs(3), "{:?}", o.elapsed);
    assert!(o.stderr.contains("rank 1 (pid ") && o.stderr.contains("without calling MPI_Finalize"), "{}", o.stderr);
}

#[test]
fn nonzero_exit_after_finalize_keeps_other_ranks() {
    let p = probe();
    let o = mpiexec(&["-n", "3", p.to_str().unwrap(), "late-exit", "4"]);
    assert_eq!(o.code, Some(4), "{}", o.stderr);
    // The other ranks were not killed: they finished their work.
    assert_eq!(sorted_lines(&o.stdout), ["rank 0 done", "rank 2 done"]);
}
