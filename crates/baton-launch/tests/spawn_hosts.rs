//! MPI_Comm_spawn in jobs run through proxies. The hosts are other names
//! of this machine (127.0.0.x: a proxy each, as for a remote host), so
//! these run anywhere; the one that needs a host where a program is
//! missing hides it in a mount namespace and skips without root.
//! `pmi_probe parent` asks for the jobs; each spawned `pmi_probe child`
//! reports what it was told and the hosts of its job's ranks (learnt
//! through its job's fence).

use std::ffi::OsStr;
use std::time::Duration;

mod common;
use common::*;
const A: &str = "127.0.0.1";
const B: &str = "127.0.0.2";
const C: &str = "127.0.0.3";

fn run(args: &[impl AsRef<OsStr>]) -> Done {
    start(args).finish(Duration::from_secs(30))
}

/// Runs `pmi_probe parent` on `hosts` with `first` (placement flags of the
/// first job) and the spawn `steps`; returns the children's hosts, in rank
/// order, after checking the run went well.
fn spawned_on(hosts: &str, first: &[&str], steps: &[&str]) -> (Vec<String>, Done) {
    let mut flags = vec!["-hosts", hosts];
    flags.extend(first);
    let args = parent_args(&flags, steps);
    let o = run(&args);
    assert_eq!(o.code, Some(0), "{args:?}: {}", o.stderr);
    assert_eq!(o.stderr, "", "{args:?}");
    let r = reports(&o.stdout);
    let nodes: Vec<String> = r.iter().map(|l| field(l, "node").to_owned()).collect();
    // Every child saw the same placement through its job's fence.
    for l in &r {
        assert_eq!(field(l, "peers"), nodes.join(","), "{}", o.stdout);
    }
    (nodes, o)
}

#[test]
fn placement_default_cyclic_host_key_and_new_hosts() {
    let three = format!("{A}:3,{B}:3,{C}:3");
    // The first job takes one slot of A and of B (-rr), and keeps them.
    let first = ["-rr", "-n", "2"];
    let (nodes, o) = spawned_on(&three, &first, &["spawn:self|4||child"]);
    assert_eq!(nodes, [A, A, B, B], "free slots, host by host");
    let r = reports(&o.stdout);
    let local: Vec<&str> = r.iter().map(|l| field(l, "local")).collect();
    assert_eq!(local, ["0/2", "1/2", "0/2", "1/2"], "local rank and size per host within the new job");
    for l in &r {
        assert_eq!((field(l, "size"), field(l, "universe"), field(l, "port")), ("4", "9", "port-0"));
        assert_eq!(field(l, "job"), field(r[0], "job"));
    }
    let job = o.stdout.lines().find_map(|l| l.strip_prefix("spawned job ")).unwrap();
    assert_eq!(job, format!("{} size 4", field(r[0], "job")));

    let (nodes, o) = spawned_on(&three, &first, &["spawn:self|4|map_by=cyclic|child"]);
    assert_eq!(nodes, [A, B, C, A], "round-robin over the hosts' free slots");
    let local: Vec<&str> = reports(&o.stdout).iter().map(|l| field(l, "local")).collect();
    assert_eq!(local, ["0/2", "0/1", "0/1", "1/2"]);
    let (nodes, _) = spawned_on(&three, &first, &[&format!("spawn:self|4|host={C},{B}|child")]);
    assert_eq!(nodes, [B, B, C, C], "only the hosts named, in host-list order");
    let (nodes, _) = spawned_on(&three, &first, &[&format!("spawn:self|5|host={C};map_by=node|child")]);
    assert_eq!(nodes, [C, C, C, C, C], "a single host, oversubscribed");
    let (nodes, _) = spawned_on(&three, &first, &["spawn:self|2|host=localhost|child"]);
    assert_eq!(nodes, [A, A], "this machine: its first host in the list");
    // More than the free slots: the rest wraps around as on empty hosts.
    let (nodes, _) = spawned_on(&three, &first, &["spawn:self|8||child"]);
    assert_eq!(nodes, [A, A, B, B, C, C, C, A]);
    // Commands of one request are placed one after the other.
    let (nodes, o) = spawned_on(&three, &first, &["spawn:self|2||child+self|2|map_by=slot;wdir=/tmp|child"]);
    assert_eq!(nodes, [A, A, B, B]);
    let r = reports(&o.stdout);
    let apps: Vec<(&str, &str)> = r.iter().map(|l| (field(l, "appnum"), field(l, "cwd"))).collect();
    let cwd = std::env::current_dir().unwrap();
    let cwd = cwd.to_str().unwrap();
    assert_eq!(apps, [("0", cwd), ("0", cwd), ("1", "/tmp"), ("1", "/tmp")]);

    // C had no rank of the first job: its proxy starts with the spawn.
    let (nodes, _) = spawned_on(&format!("{A},{B},{C}:2"), &["-n", "2"], &["spawn:self|3||child"]);
    assert_eq!(nodes, [C, C, A]);
}

#[test]
fn spawned_jobs_spawn_and_fence_across_hosts() {
    let o = run(&parent_args(
        &["-l", "-hosts", &format!("{A},{B}"), "-n", "2"],
        &["spawn:self|2|map_by=node|child-spawn", "spawn:self|1||child"],
    ));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(o.stderr, "");
    // Job 1's rank 0 asked for two more, one per host.
    let grand = o.stdout.lines().find(|l| l.contains("grandchildren ")).expect(&o.stdout);
    assert!(grand.starts_with("[0] grandchildren job ") && grand.ends_with(" size 2"), "{grand}");
    let mut r: Vec<&str> = o.stdout.lines().filter(|l| l.contains("] child job ")).collect();
    r.sort();
    assert_eq!(r.len(), 3, "{}", o.stdout);
    let grandkids: Vec<&&str> = r.iter().filter(|l| field(l, "port") == "grandchild").collect();
    let nodes: Vec<&str> = grandkids.iter().map(|l| field(l, "node")).collect();
    assert!(grandkids.iter().all(|l| field(l, "peers") == nodes.join(",")), "{}", o.stdout);
    // Which host comes first depends on whether the first job has ended
    // (freeing its slots) by the time the request is placed.
    let mut sorted = nodes.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, [A, B], "one per host");
}

#[test]
fn refusals_start_nothing() {
    let p = probe_arg();
    let o = run(&parent_args(
        &["-hosts", &format!("{A}:2,{B}:2"), "-rr", "-n", "2"],
        &[
            "spawn:self|1|host=elsewhere.invalid|child",
            "spawn:self|1|map_by=diagonal|child",
            "spawn:nosuch|2|map_by=node|",
            "spawn:self|2|map_by=node;wdir=/nonexistent/dir|child",
            "spawn:self|0||child",
            "spawn:self|1|env=NOEQUALS|child",
            &format!("spawn:self|1||child+self|1|host={B},{A},nowhere|child"),
        ],
    ));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(o.stderr, "");
    assert!(!o.stdout.contains("child "), "something was started:\n{}", o.stdout);
    let errors: Vec<&str> = o.stdout.lines().filter_map(|l| l.strip_prefix("spawn error: ")).collect();
    assert_eq!(errors.len(), 7, "{}", o.stdout);
    assert_eq!(
        errors[0],
        format!("cannot spawn '{p}': info host 'elsewhere.invalid' is not one of the job's hosts ({A}, {B})")
    );
    assert_eq!(
        errors[1],
        format!("cannot spawn '{p}': info map_by 'diagonal' is not one of block, slot, cyclic, node")
    );
    // Looked up on each host, which both say so: either is reported.
    assert!(errors[2].starts_with("cannot spawn 'nosuch' on host 127.0.0."), "{}", errors[2]);
    assert!(errors[2].ends_with(": no such executable in PATH"), "{}", errors[2]);
    assert!(errors[3].ends_with(": working directory '/nonexistent/dir' is not a directory"), "{}", errors[3]);
    assert_eq!(errors[4], "cannot spawn: no process was asked for (maxprocs 0)");
    assert!(errors[5].ends_with(": info env line 'NOEQUALS' is not NAME=VALUE"), "{}", errors[5]);
    assert!(
        errors[6].starts_with(&format!("cannot spawn '{p}' (command 2 of 2): info host 'nowhere'")),
        "{}",
        errors[6]
    );
}

#[test]
fn a_spawned_job_failing_leaves_the_parent_running() {
    let r = start(&parent_args(
        &["-hosts", &format!("{A},{B}:3"), "-n", "2"],
        &[&format!("spawn:self|2|host={B}|child-sleep"), "wait-stdin", &format!("spawn:self|1|host={B}|child")],
    ));
    let o = finish_after_spawned_rank_killed(r, B, Duration::from_secs(20));
    // Spawning still works afterwards, on that host too.
    let nodes: Vec<&str> = reports(&o.stdout).iter().map(|l| field(l, "node")).collect();
    assert_eq!(nodes, [B], "{}", o.stdout);
}

#[test]
fn the_parent_failing_or_an_abort_ends_spawned_jobs_on_every_host() {
    let hosts = format!("{A},{B}");
    let mut r = start(&parent_args(
        &["-hosts", &hosts, "-n", "2"],
        &["spawn:self|2|map_by=node|child-sleep", "pid", "wait-stdin"],
    ));
    let mut pids = pid_lines(&r.wait_lines("child rank ", 2));
    let parent = pid_lines(&r.wait_lines("rank 0 pid ", 1))[0];
    // SAFETY: the process was started by this test's mpiexec.
    unsafe { libc::kill(parent, libc::SIGKILL) };
    let o = r.finish(Duration::from_secs(10));
    assert_eq!(o.code, Some(137), "{}", o.stderr);
    assert_eq!(o.stderr, format!("mpiexec: rank 0 (pid {parent} on {A}) was killed by signal 9 (Killed)\n"));
    assert!(o.elapsed < Duration::from_secs(3), "{:?}", o.elapsed);
    pids.push(parent);
    assert_all_gone(&pids, Duration::from_millis(500));

    let r = start(&parent_args(
        &["-hosts", &hosts, "-n", "2"],
        &[&format!("spawn:self|1|host={A}|child-sleep"), &format!("spawn:self|2|host={B}|child-abort"), "wait-stdin"],
    ));
    let o = r.finish(Duration::from_secs(10));
    assert_spawned_abort(&o, Duration::from_millis(500));
}

#[test]
fn a_program_missing_on_one_host_starts_nowhere() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping: hiding a program on one host needs root (a mount namespace)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("baton-spawn-hosts-{}", std::process::id()));
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let copy = bin.join("probe-copy");
    std::fs::copy(probe(), &copy).unwrap();
    // A remote shell that runs the proxy here; for host "hidden" inside a
    // mount namespace where an empty file system covers the copy's directory.
    let rsh = dir.join("rsh");
    let script = format!(
        "#!/bin/sh\nhost=$1\nshift\ncase $host in\n  hidden) exec unshare -m sh -c 'mount -t tmpfs tmpfs \"$1\" && exec sh -c \"$2\"' sh '{}' \"$*\" ;;\n  *) exec sh -c \"$*\" ;;\nesac\n",
        bin.display()
    );
    std::fs::write(&rsh, script).unwrap();
    std::fs::set_permissions(&rsh, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let c = copy.to_str().unwrap();
    let o = run(&parent_args(
        &["--rsh", rsh.to_str().unwrap(), "-hosts", &format!("{A},hidden"), "-n", "2"],
        &[&format!("spawn:{c}|2|map_by=node|child-sleep"), &format!("spawn:{c}|1|host={A}|child")],
    ));
    let left = pgrep(c);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(o.stderr, "");
    let errors: Vec<&str> = o.stdout.lines().filter_map(|l| l.strip_prefix("spawn error: ")).collect();
    assert_eq!(
        errors,
        [format!(
            "cannot spawn '{c}' on host hidden: '{c}' does not exist (the processes started on other hosts were killed)"
        )]
    );
    assert!(!o.stdout.contains("child rank"), "{}", o.stdout);
    // The job goes on: the next spawn works where the program is.
    assert_eq!(reports(&o.stdout).len(), 1, "{}", o.stdout);
    assert!(left.is_empty(), "left running: {left:?}");
}

#[test]
fn spawn_latency_across_hosts() {
    let p = probe_arg();
    for n in ["1", "4"] {
        // Wherever the free slots are, 4 children take both hosts.
        let o = run(&["-hosts", &format!("{A},{B}"), "-n", "2", &p, "spawn-time", n, "5"]);
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        let mut lat = Vec::new();
        for req in spawn_requests(&o.stdout) {
            assert_eq!(req.starts.len().to_string(), n, "{}", o.stdout);
            lat.push(req.latency());
        }
        assert_eq!(lat.len(), 5);
        eprintln!("spawn of {n} over 2 hosts: (request -> last child running, request -> answer) in µs: {lat:?}");
        lat.sort();
        // Generous: a debug build on a loaded machine; the numbers are printed.
        assert!(lat[2].0 < 500_000, "median spawn latency {} µs", lat[2].0);
    }
}

/// The parent pid of `pid`.
fn ppid(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat.rsplit_once(") ").unwrap().1.split(' ').nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_lost_host_with_spawned_processes_ends_everything() {
    // C runs nothing of the first job: its proxy starts for the children.
    let mut r = start(&parent_args(
        &["-hosts", &format!("{A},{B},{C}"), "-n", "2"],
        &[&format!("spawn:self|2|host={C}|child-sleep"), "wait-stdin"],
    ));
    let kids = pid_lines(&r.wait_lines("child rank ", 2));
    let proxy = ppid(kids[0]);
    // SAFETY: the proxy was started by this test's mpiexec.
    unsafe { libc::kill(proxy, libc::SIGKILL) };
    let o = r.finish(Duration::from_secs(10));
    assert_eq!(o.code, Some(255), "{}", o.stderr);
    assert!(
        o.stderr.starts_with(&format!("mpiexec: lost contact with host {C} (spawned job 1: ranks 0-1): ")),
        "{}",
        o.stderr
    );
    assert!(o.elapsed < Duration::from_secs(5), "{:?}", o.elapsed);
    assert_all_gone(&kids, Duration::from_millis(500));
}

#[test]
fn many_spawns_leave_no_descriptors_or_threads_behind_in_the_proxy() {
    // pmi_probe measures its launcher, here the proxy of its host.
    let o = run(&["-hosts", &format!("{A},{B}"), "-n", "2", &probe_arg(), "spawn-loop", "250"]);
    assert_spawn_loop_left_nothing(&o, "the proxy");
}
