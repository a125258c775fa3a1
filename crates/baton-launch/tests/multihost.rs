//! Multi-host launches. Hosts that name this machine (127.0.0.x) run
//! everywhere; the others are network namespaces made by
//! `scripts/netns-hosts` and reached through `scripts/netns-rsh`, so those
//! tests need root and skip (saying why) without it. Each namespace test
//! makes hosts of its own (own prefix, bridge and subnet) so tests can run
//! in parallel, and removes them on every exit path.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

mod common;
use common::{collect, pgrep, probe_arg, sorted_lines, spawn_requests, Done, SpawnRequest, MPIEXEC};

fn scripts() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts").canonicalize().unwrap()
}

fn rsh() -> String {
    scripts().join("netns-rsh").to_str().unwrap().to_owned()
}

fn spawn(args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(MPIEXEC);
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

fn mpiexec(args: &[&str], env: &[(&str, &str)]) -> Done {
    collect(spawn(args, env), Instant::now(), Duration::from_secs(30))
}

/// Fails the test when a process whose command line contains `pattern` (`what`: which ones)
/// is still there after `limit`.
fn assert_no_process(pattern: &str, limit: Duration, what: &str) {
    let start = Instant::now();
    loop {
        let left = pgrep(pattern);
        if left.is_empty() {
            return;
        }
        if start.elapsed() > limit {
            panic!("{what} left behind: {left:?}");
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Reads `n` lines of `child`'s stdout (its ranks saying they are up), failing if it ends first.
/// The reader returned keeps the pipe open while the test goes on.
fn read_lines(child: &mut Child, n: usize) -> BufReader<ChildStdout> {
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    for _ in 0..n {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0);
    }
    reader
}

/// Starts mpiexec with `n` ranks over every host of `h`, each running `sh -c script`, and waits
/// until each has printed its first line. Gives mpiexec and the reader that keeps its stdout open.
fn start_ranks(h: &Hosts, n: usize, script: &str, env: &[(&str, &str)]) -> (Child, BufReader<ChildStdout>) {
    let n_arg = n.to_string();
    let mut child = spawn(&["--rsh", &rsh(), "-hosts", &h.list(&[]), "-n", &n_arg, "sh", "-c", script], env);
    let reader = read_lines(&mut child, n);
    (child, reader)
}

/// A distinctive `sleep` argument, so pgrep finds this test's ranks only.
fn marker(test: u32) -> String {
    format!("3{test}.{}", std::process::id())
}

// ------------------------------------------------------ namespace hosts

/// Namespace hosts of one test; removed when dropped (also on panic).
struct Hosts {
    env: Vec<(String, String)>,
    names: Vec<String>,
}

impl Hosts {
    /// `n` hosts for test number `id` (1..=200), or `None` (with the reason
    /// printed) where namespaces cannot be made.
    fn up(id: u32, n: u32) -> Option<Hosts> {
        Self::up_with(id, n, &[])
    }

    /// As `up`, with more arguments for `netns-hosts up` (`--ipv6`: also fdXX:id::K/64).
    fn up_with(id: u32, n: u32, extra: &[&str]) -> Option<Hosts> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipping: multi-host namespace tests need root");
            return None;
        }
        let prefix = format!("bt{id}h");
        let env = vec![
            ("NETNS_PREFIX".to_owned(), prefix.clone()),
            ("NETNS_BRIDGE".to_owned(), format!("bt{id}br")),
            ("NETNS_NET".to_owned(), format!("10.79.{id}")),
        ];
        let hosts = Hosts { env, names: (1..=n).map(|k| format!("{prefix}{k}")).collect() };
        let n_s = n.to_string();
        let args: Vec<&str> = ["up", n_s.as_str()].into_iter().chain(extra.iter().copied()).collect();
        let out = hosts.script(&args);
        match out.status.code() {
            Some(0) => Some(hosts),
            Some(77) => {
                eprintln!("skipping: {}", String::from_utf8_lossy(&out.stderr).trim());
                None
            }
            _ => panic!("netns-hosts up failed: {}", String::from_utf8_lossy(&out.stderr)),
        }
    }

    fn script(&self, args: &[&str]) -> std::process::Output {
        let mut cmd = Command::new(scripts().join("netns-hosts"));
        cmd.args(args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    fn list(&self, spec: &[&str]) -> String {
        self.names
            .iter()
            .zip(spec.iter().chain(std::iter::repeat(&"")))
            .map(|(h, s)| format!("{h}{s}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        let _ = self.script(&["down"]);
    }
}

// ------------------------------------------------- hosts on this machine

#[test]
fn placement_and_environment_on_local_hosts() {
    let script = "echo $BATON_RANK $BATON_NODE $BATON_LOCAL_RANK $BATON_LOCAL_SIZE $BATON_UNIVERSE_SIZE \
                  $(readlink /proc/$$/fd/$BATON_SHM_FD)";
    let parse = |o: &Done| -> Vec<Vec<String>> {
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        let mut rows: Vec<Vec<String>> =
            o.stdout.lines().map(|l| l.split_whitespace().map(str::to_owned).collect()).collect();
        rows.sort_by_key(|r| r[0].parse::<u32>().unwrap());
        rows
    };
    let node_of = |rows: &[Vec<String>]| rows.iter().map(|r| r[1].clone()).collect::<Vec<_>>();
    let (a, b) = ("127.0.0.1", "127.0.0.2");

    // Block: fill 127.0.0.1's two slots, then 127.0.0.2's one, then wrap.
    let rows = parse(&mpiexec(&["-hosts", "127.0.0.1:2,127.0.0.2", "-n", "5", "sh", "-c", script], &[]));
    assert_eq!(node_of(&rows), [a, a, b, a, a]);
    let local: Vec<(String, String)> = rows.iter().map(|r| (r[2].clone(), r[3].clone())).collect();
    let want = [("0", "4"), ("1", "4"), ("0", "1"), ("2", "4"), ("3", "4")];
    assert_eq!(local, want.map(|(x, y)| (x.to_owned(), y.to_owned())));
    assert!(rows.iter().all(|r| r[4] == "5"), "universe = max(slots, ranks)");
    // One memfd per host, shared by that host's ranks only.
    assert!(rows.iter().all(|r| r[5].starts_with("/memfd:baton-shm-")));
    assert_eq!(rows[0][5], rows[1][5]);
    assert_eq!(rows[0][5], rows[4][5]);

    // Cyclic, by either spelling.
    for flag in [&["-rr"][..], &["--map-by", "node"][..]] {
        let mut args = flag.to_vec();
        args.extend(["-hosts", "127.0.0.1:2,127.0.0.2", "-n", "5", "sh", "-c", script]);
        let rows = parse(&mpiexec(&args, &[]));
        assert_eq!(node_of(&rows), [a, b, a, a, b], "{flag:?}");
    }

    // -ppn overrides slots; a host file with comments and slots=.
    let rows = parse(&mpiexec(&["-ppn", "2", "-hosts", "127.0.0.1:5,127.0.0.2", "-n", "4", "sh", "-c", script], &[]));
    assert_eq!(node_of(&rows), [a, a, b, b]);
    assert!(rows.iter().all(|r| r[4] == "4"));
    let hf = std::env::temp_dir().join(format!("baton-hostfile-{}", std::process::id()));
    std::fs::write(&hf, "# two local hosts\n127.0.0.2 slots=1\n127.0.0.1:3  # three\n").unwrap();
    let o = mpiexec(&["-hostfile", hf.to_str().unwrap(), "-n", "4", "sh", "-c", script], &[]);
    std::fs::remove_file(&hf).unwrap();
    let rows = parse(&o);
    assert_eq!(node_of(&rows), [b, a, a, a]);
}

/// Peak resident memory of a live process, in KiB (`None` once it exited).
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn a_slow_reader_of_output_holds_the_ranks_back_not_mpiexec_memory() {
    // Two "hosts", so the output crosses proxies and links; each rank prints
    // 48 MiB of lines as fast as it can while nobody reads mpiexec's stdout.
    let per_rank: u64 = 48 << 20;
    let script = format!("yes {} | head -c {per_rank}", "x".repeat(63));
    let mut child = spawn(&["-hosts", "127.0.0.1,127.0.0.2", "-n", "2", "sh", "-c", &script], &[]);
    thread::sleep(Duration::from_millis(1500));
    let held = peak_rss_kib(child.id()).unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let (mut total, mut newlines, mut peak) = (0u64, 0u64, held);
    loop {
        peak = peak.max(peak_rss_kib(child.id()).unwrap_or(0));
        let n = out.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        total += n as u64;
        newlines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(total, 2 * per_rank, "output lost or duplicated");
    assert_eq!(newlines, 2 * per_rank / 64);
    // Without back-pressure mpiexec would hold nearly all 96 MiB by now.
    assert!(held < 40 << 10, "mpiexec grew to {held} KiB while its stdout was not read");
    assert!(peak < 40 << 10, "mpiexec peaked at {peak} KiB");
}

#[test]
fn single_local_host_runs_without_a_proxy() {
    let child = spawn(&["-hosts", "localhost:4", "-n", "2", "sh", "-c", "echo $PPID $BATON_NODE"], &[]);
    let pid = child.id().to_string();
    let o = collect(child, Instant::now(), Duration::from_secs(10));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    for line in o.stdout.lines() {
        assert_eq!(line, format!("{pid} localhost"), "ranks are mpiexec's own children");
    }
}

#[test]
fn kvs_and_output_across_local_hosts() {
    let p = probe_arg();
    let o = mpiexec(&["-l", "-hosts", "127.0.0.1,127.0.0.2,127.0.0.3", "-n", "6", &p, "kv"], &[]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let want: Vec<String> = (0..6).map(|r| format!("[{r}] rank {r} of 6 ok appnum 0 universe 6")).collect();
    assert_eq!(sorted_lines(&o.stdout), want);
}

#[test]
fn remote_shell_failures_are_reported() {
    let o = mpiexec(&["--rsh", "/nonexistent/baton-rsh", "-hosts", "far-a,far-b", "-n", "2", "true"], &[]);
    assert_eq!(o.code, Some(255), "{}", o.stderr);
    assert!(
        o.stderr.contains("cannot run the remote shell '/nonexistent/baton-rsh' for host far-a: No such file"),
        "{}",
        o.stderr
    );
    let o = mpiexec(&["-hosts", "far-a,far-b", "-n", "2", "true"], &[("BATON_RSH", "false")]);
    assert_eq!(o.code, Some(255), "{}", o.stderr);
    assert!(
        o.stderr.contains("cannot start the proxy on host far-")
            && o.stderr.contains("(remote shell 'false') exited with status 1 before the proxy connected"),
        "{}",
        o.stderr
    );
    assert!(o.elapsed < Duration::from_secs(5), "{:?}", o.elapsed);
    // A remote shell that starts a local rank which then fails: the job's
    // started parts (the other local proxy) are cleaned up too.
    let o = mpiexec(&["-hosts", "127.0.0.1,127.0.0.2", "-n", "2", "/nonexistent/prog"], &[]);
    assert_eq!(o.code, Some(127), "{}", o.stderr);
    assert!(o.stderr.contains("cannot run '/nonexistent/prog' on host 127.0.0."), "{}", o.stderr);
}

// -------------------------------------------------------- namespace hosts

#[test]
fn tree_of_three_hosts_exchanges_keys() {
    let Some(h) = Hosts::up(1, 3) else { return };
    let p = probe_arg();
    let list = h.list(&[":2", ":2", ":2"]);
    let env = [("BATON_LAUNCH_FANOUT", "2")];
    let o = mpiexec(&["-l", "--rsh", &rsh(), "-hosts", &list, "-n", "6", &p, "kv"], &env);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let want: Vec<String> = (0..6).map(|r| format!("[{r}] rank {r} of 6 ok appnum 0 universe 6")).collect();
    assert_eq!(sorted_lines(&o.stdout), want);

    // With fan-out 2, mpiexec starts hosts 1 and 3 and host 1 starts host 2:
    // each proxy names its parent's address on its command line.
    let script = "echo $BATON_NODE $(tr '\\0' ' ' < /proc/$PPID/cmdline | sed 's/.*--parent //')";
    let o = mpiexec(&["--rsh", &rsh(), "-hosts", &h.list(&[]), "-n", "3", "sh", "-c", script], &env);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let parent_of = |host: &str| {
        let line = o.stdout.lines().find(|l| l.starts_with(&format!("{host} "))).unwrap().to_owned();
        line.split_whitespace().nth(1).unwrap().to_owned()
    };
    assert!(parent_of(&h.names[1]).starts_with("10.79.1.1:"), "{}", o.stdout);
    assert!(!parent_of(&h.names[0]).contains("10.79.1.1:"), "{}", o.stdout);
    assert!(parent_of(&h.names[2]).contains("10.79.1.254:"), "{}", o.stdout);

    // Host 2's output comes up through host 1, and its acknowledgements go
    // down the same way: more than a window of it must arrive whole.
    let bytes = 3 * baton_window();
    let script = format!("[ $BATON_NODE = {} ] && yes {} | head -c {bytes}; true", h.names[1], "x".repeat(63));
    let o = mpiexec(&["--rsh", &rsh(), "-hosts", &h.list(&[]), "-n", "3", "sh", "-c", &script], &env);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(o.stdout.len(), bytes);
    assert!(o.stdout.lines().all(|l| l.len() == 63));
}

/// mpiexec's output window per host (crates/baton-launch/src/output.rs).
fn baton_window() -> usize {
    4 << 20
}

#[test]
fn tree_over_ipv6_only() {
    let Some(h) = Hosts::up_with(9, 3, &["--ipv6"]) else { return };
    // Every launcher connection over IPv6: mpiexec's and host 1's listeners, dual-stack,
    // advertise only what `-iface` selects, and the proxies dial those.
    let p = probe_arg();
    let env = [("BATON_LAUNCH_FANOUT", "2")];
    let list = h.list(&[":2", ":2", ":2"]);
    let args = ["-l", "--rsh", &rsh(), "-iface", "fd79:9::/64", "-hosts", &list, "-n", "6", &p, "kv"];
    let o = mpiexec(&args, &env);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let want: Vec<String> = (0..6).map(|r| format!("[{r}] rank {r} of 6 ok appnum 0 universe 6")).collect();
    assert_eq!(sorted_lines(&o.stdout), want);

    let script = "echo $BATON_NODE $(tr '\\0' ' ' < /proc/$PPID/cmdline | sed 's/.*--parent //')";
    let args = ["--rsh", &rsh(), "-iface", "fd79:9::/64", "-hosts", &h.list(&[]), "-n", "3", "sh", "-c", script];
    let o = mpiexec(&args, &env);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let parent_of = |host: &str| {
        let line = o.stdout.lines().find(|l| l.starts_with(&format!("{host} "))).unwrap().to_owned();
        line.split_whitespace().nth(1).unwrap().to_owned()
    };
    assert!(parent_of(&h.names[1]).starts_with("[fd79:9::1]:"), "{}", o.stdout);
    assert_eq!(parent_of(&h.names[0]).split(',').count(), 1, "{}", o.stdout);
    assert!(parent_of(&h.names[0]).starts_with("[fd79:9::254]:"), "{}", o.stdout);

    // Without -iface both families are offered, IPv4 first.
    let args = ["--rsh", &rsh(), "-hosts", &h.list(&[]), "-n", "3", "sh", "-c", script];
    let o = mpiexec(&args, &env);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let p1 = o.stdout.lines().find(|l| l.starts_with(&format!("{} ", h.names[0]))).unwrap().to_owned();
    let v4 = p1.find("10.79.9.254:").expect(&p1);
    let v6 = p1.find("[fd79:9::254]:").expect(&p1);
    assert!(v4 < v6, "{p1}");
}

#[test]
fn other_hosts_run_the_launch_agent() {
    let Some(h) = Hosts::up(10, 2) else { return };
    // A wrapper that notes where it ran, then runs the real mpiexec: as an installation at
    // another path on the other hosts would be.
    let dir = std::env::temp_dir().join(format!("baton-agent-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    let log = dir.join("log");
    let agent = dir.join("bin/mpiexec");
    std::fs::write(&agent, format!("#!/bin/sh\nhostname >> {}\nexec {MPIEXEC} \"$@\"\n", log.display())).unwrap();
    std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let hosts = format!("{},127.0.0.1", h.list(&[]));
    let script = "echo $BATON_RANK $BATON_NODE";
    let rsh = rsh();
    for how in [vec!["--launch-agent", agent.to_str().unwrap()], vec!["--prefix", dir.to_str().unwrap()]] {
        let _ = std::fs::remove_file(&log);
        let mut args = vec!["--rsh", rsh.as_str(), "-hosts", &hosts, "-n", "3"];
        args.extend(how.iter().copied());
        args.extend(["sh", "-c", script]);
        let o = mpiexec(&args, &[]);
        assert_eq!(o.code, Some(0), "{how:?}: {}", o.stderr);
        assert_eq!(sorted_lines(&o.stdout).len(), 3, "{}", o.stdout);
        // The two namespace hosts ran the agent; this machine's host forked mpiexec itself.
        let mut ran = sorted_lines(&std::fs::read_to_string(&log).unwrap());
        ran.dedup();
        assert_eq!(ran, h.names, "{how:?}");
    }
    // An agent that is not there: the job ends at once, naming the host (whichever of the two
    // failed first).
    let o = mpiexec(&["--rsh", &rsh, "-hosts", &h.list(&[]), "--prefix", "/nonexistent", "-n", "2", "true"], &[]);
    assert_ne!(o.code, Some(0));
    let named = h.names.iter().any(|n| o.stderr.contains(&format!("cannot start the proxy on host {n}:")));
    assert!(named, "{}", o.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn environment_output_and_exit_status_across_hosts() {
    let Some(h) = Hosts::up(2, 2) else { return };
    let wdir = std::env::temp_dir().canonicalize().unwrap();
    // mpiexec's environment travels, except its login session's variables
    // (DISPLAY here): the remote shell's login environment has none.
    let script = "echo $BATON_RANK $BATON_NODE $BATON_LOCAL_RANK $BATON_LOCAL_SIZE \
                  $GV-$XV-$LV-$FROM_MPIEXEC-${DISPLAY-nodisplay} $(pwd); echo err$BATON_RANK >&2";
    let o = mpiexec(
        &[
            "-l",
            "--rsh",
            &rsh(),
            "-hosts",
            &h.list(&[]),
            "-genv",
            "GV",
            "g",
            "-x",
            "XV=x",
            "-wdir",
            wdir.to_str().unwrap(),
            "-n",
            "3",
            "-env",
            "LV",
            "l",
            "sh",
            "-c",
            script,
        ],
        &[("FROM_MPIEXEC", "inherited"), ("DISPLAY", ":7")],
    );
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let (a, b, w) = (&h.names[0], &h.names[1], wdir.display());
    assert_eq!(
        sorted_lines(&o.stdout),
        [
            format!("[0] 0 {a} 0 2 g-x-l-inherited-nodisplay {w}"),
            format!("[1] 1 {b} 0 1 g-x-l-inherited-nodisplay {w}"),
            format!("[2] 2 {a} 1 2 g-x-l-inherited-nodisplay {w}"),
        ]
    );
    assert_eq!(sorted_lines(&o.stderr), ["[0] err0", "[1] err1", "[2] err2"]);

    // Exit status of a remote rank, named with its host.
    let o = mpiexec(
        &["--rsh", &rsh(), "-hosts", &h.list(&[]), "-n", "2", "sh", "-c", "[ $BATON_RANK = 1 ] && exit 6; exit 0"],
        &[],
    );
    assert_eq!(o.code, Some(6), "{}", o.stderr);
    assert!(o.stderr.starts_with("mpiexec: rank 1 (pid "), "{}", o.stderr);
    assert!(o.stderr.contains(&format!(" on {b}) exited with status 6")), "{}", o.stderr);

    // Rank 0's stdin crosses hosts too.
    let mut child = Command::new(MPIEXEC)
        .args(["-l", "--rsh", &rsh(), "-hosts", &format!("{b},{a}"), "-n", "2", "sh", "-c", "cat; echo end"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"one\ntwo\n").unwrap();
    let o = collect(child, Instant::now(), Duration::from_secs(20));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(sorted_lines(&o.stdout), ["[0] end", "[0] one", "[0] two", "[1] end"]);
}

#[test]
fn remote_rank_killed_ends_the_job() {
    let Some(h) = Hosts::up(3, 2) else { return };
    let p = probe_arg();
    let mut child = spawn(&["--rsh", &rsh(), "-hosts", &h.list(&[]), "-n", "4", &p, "selfkill"], &[]);
    let mut stdout = String::new();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    while stdout.lines().filter(|l| l.contains(" pid ")).count() < 4 {
        assert!(reader.read_line(&mut stdout).unwrap() > 0, "{stdout}");
    }
    let rank1 = stdout.lines().find_map(|l| l.strip_prefix("rank 1 pid ")).unwrap().to_owned();
    let pids: Vec<String> = stdout.lines().filter_map(|l| l.split(" pid ").nth(1)).map(str::to_owned).collect();
    let o = collect(child, Instant::now(), Duration::from_secs(10));
    assert_eq!(o.code, Some(137), "{}", o.stderr);
    assert!(o.elapsed < Duration::from_secs(3), "{:?}", o.elapsed);
    assert_eq!(
        o.stderr.trim(),
        format!("mpiexec: rank 1 (pid {rank1} on {}) was killed by signal 9 (Killed)", h.names[1])
    );
    thread::sleep(Duration::from_millis(200));
    for pid in pids {
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "rank pid {pid} survived");
    }
}

#[test]
fn lost_link_ends_the_job_in_bounded_time() {
    let Some(h) = Hosts::up(4, 3) else { return };
    let m = marker(4);
    let script = format!("echo up; exec sleep {m}");
    let (child, _reader) = start_ranks(&h, 3, &script, &[("BATON_HEARTBEAT_TIMEOUT", "2")]);
    let pulled = Instant::now();
    let st =
        Command::new("ip").args(["netns", "exec", &h.names[1], "ip", "link", "set", "dev", "eth0", "down"]).status();
    assert!(st.unwrap().success());
    let o = collect(child, Instant::now(), Duration::from_secs(15));
    let took = pulled.elapsed();
    assert_eq!(o.code, Some(255), "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!("mpiexec: lost contact with host {} (rank 1): no message for 2.", h.names[1])),
        "{}",
        o.stderr
    );
    // Documented bound: heartbeat timeout plus the kill grace.
    assert!(took < Duration::from_millis(3500), "took {took:?}");
    // The cut-off host's proxy notices on its own and kills its rank.
    assert_no_process(&m, Duration::from_secs(3), "ranks");
}

#[test]
fn sigkilled_mpiexec_leaves_no_process_on_any_host() {
    let Some(h) = Hosts::up(5, 3) else { return };
    let m = marker(5);
    let script = format!("echo up; exec sleep {m}");
    let (mut child, _reader) = start_ranks(&h, 6, &script, &[("BATON_LAUNCH_FANOUT", "2")]);
    let sleeping = pgrep(&m).iter().filter(|l| l.split_once(' ').is_some_and(|(_, c)| c.starts_with("sleep "))).count();
    assert_eq!(sleeping, 6);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_no_process(&m, Duration::from_secs(2), "ranks");
    assert_no_process("--proxy --node [0-9]* --parent 10.79.5.", Duration::from_secs(2), "proxies");
}

#[test]
fn signals_and_timeout_cross_hosts() {
    let Some(h) = Hosts::up(6, 2) else { return };
    let m = marker(6);
    // Ranks that ignore SIGTERM are SIGKILLed after the grace period.
    let script = format!("trap '' TERM; echo up; sleep {m} & wait");
    let (child, _reader) = start_ranks(&h, 2, &script, &[]);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = collect(child, Instant::now(), Duration::from_secs(10));
    assert_eq!(o.code, Some(128 + libc::SIGTERM), "{}", o.stderr);
    assert!(o.elapsed < Duration::from_secs(3), "{:?}", o.elapsed);
    assert_no_process(&m, Duration::from_secs(1), "ranks");
    let o = mpiexec(&["--timeout", "1", "--rsh", &rsh(), "-hosts", &h.list(&[]), "-n", "2", "sleep", &m], &[]);
    assert_eq!(o.code, Some(124), "{}", o.stderr);
    assert!(o.elapsed < Duration::from_secs(4), "{:?}", o.elapsed);
    assert_no_process(&m, Duration::from_secs(1), "ranks");
}

#[test]
fn unauthenticated_connection_to_the_launcher_port_is_refused() {
    let Some(h) = Hosts::up(7, 2) else { return };
    // Each rank prints the launcher's port (from its proxy's command line),
    // then waits long enough for the intruder to be dealt with.
    let script =
        "echo \"$(tr '\\0' ' ' < /proc/$PPID/cmdline | sed 's/.*--parent [^,]*:\\([0-9]*\\).*/port \\1/')\"; sleep 1; echo done";
    let mut child = spawn(&["--rsh", &rsh(), "-hosts", &h.list(&[]), "-n", "2", "sh", "-c", script], &[]);
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let port: u16 = line.trim().strip_prefix("port ").unwrap().parse().unwrap();
    // From host 1, where a real proxy would come from: garbage, then a
    // silent connection that is dropped.
    let intrude = format!(
        "exec 3<>/dev/tcp/10.79.7.254/{port}; printf 'GET / HTTP/1.0\\r\\n\\r\\n0123456789012345678901234567890123456789' >&3; \
         cat <&3 >/dev/null; exec 4<>/dev/tcp/10.79.7.254/{port}"
    );
    let st = Command::new("ip").args(["netns", "exec", &h.names[0], "bash", "-c", &intrude]).status().unwrap();
    assert!(st.success());
    let mut rest = String::new();
    reader.read_to_string(&mut rest).unwrap();
    let o = collect(child, Instant::now(), Duration::from_secs(15));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(rest.matches("done").count(), 2, "{rest}");
    let rejected: Vec<&str> = o
        .stderr
        .lines()
        .filter(|l| {
            l.starts_with("mpiexec: rejected an unauthenticated connection to the launcher port from 10.79.7.1:")
        })
        .collect();
    assert!(!rejected.is_empty(), "{}", o.stderr);
    assert!(rejected[0].contains("bad magic"), "{}", o.stderr);
}

#[test]
fn spawn_across_namespace_hosts() {
    let Some(h) = Hosts::up(8, 2) else { return };
    let p = probe_arg();
    let (h1, h2) = (h.names[0].as_str(), h.names[1].as_str());
    let node_of = |o: &Done| -> Vec<String> {
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        let mut v: Vec<(u32, String)> = o
            .stdout
            .lines()
            .filter(|l| l.starts_with("child job "))
            .map(|l| {
                let w: Vec<&str> = l.split(' ').collect();
                let at = |k: &str| w[w.iter().position(|x| *x == k).unwrap() + 1].to_owned();
                (at("rank").parse().unwrap(), at("node"))
            })
            .collect();
        v.sort();
        v.into_iter().map(|(_, n)| n).collect()
    };
    // Both ranks of the first job on the first host; the children where
    // the info asks, with that host's BATON_NODE.
    let spawn = format!("spawn:self|2|host={h2}|child");
    let o = mpiexec(&["--rsh", &rsh(), "-hosts", &h.list(&[":2", ":2"]), "-n", "2", &p, "parent", &spawn], &[]);
    assert_eq!(node_of(&o), [h2, h2]);
    let o = mpiexec(
        &[
            "--rsh",
            &rsh(),
            "-rr",
            "-hosts",
            &h.list(&[":3", ":3"]),
            "-n",
            "2",
            &p,
            "parent",
            "spawn:self|4|map_by=node|child",
        ],
        &[],
    );
    assert_eq!(node_of(&o), [h1, h2, h1, h2]);

    // End-to-end time from the request to the last child running (the
    // namespaces share this machine's monotonic clock).
    for n in ["1", "4"] {
        let o = mpiexec(&["--rsh", &rsh(), "-hosts", &h.list(&[]), "-n", "2", &p, "spawn-time", n, "5"], &[]);
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        let mut lat: Vec<(u128, u128)> = spawn_requests(&o.stdout).iter().map(SpawnRequest::latency).collect();
        assert_eq!(lat.len(), 5, "{}", o.stdout);
        eprintln!(
            "spawn of {n} over 2 namespace hosts: (request -> last child running, request -> answer) in µs: {lat:?}"
        );
        lat.sort();
        assert!(lat[2].0 < 500_000, "median spawn latency {} µs", lat[2].0);
    }
}
