//! MPI_Comm_spawn from the launcher's side: `pmi_probe parent ...` asks
//! mpiexec for new jobs through `PmiClient::spawn`, and the spawned copies
//! of `pmi_probe` report what they were told. (Jobs on several hosts:
//! `spawn_hosts.rs`.)

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

mod common;
use common::*;

fn run(args: &[impl AsRef<OsStr>]) -> Done {
    start(args).finish(Duration::from_secs(20))
}

#[test]
fn one_and_four_children_get_their_environment() {
    let p = probe();
    let o = run(&parent_args(&["-n", "1"], &["spawn:self|1|wdir=/|child", "spawn:self|4||child x y"]));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(o.stderr, "");
    let jobs: Vec<(String, String)> = o
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("spawned job "))
        .map(|l| {
            let (id, size) = l.split_once(" size ").unwrap();
            (id.to_owned(), size.to_owned())
        })
        .collect();
    assert_eq!(jobs.len(), 2, "{}", o.stdout);
    assert_eq!((jobs[0].1.as_str(), jobs[1].1.as_str()), ("1", "4"));
    assert_ne!(jobs[0].0, jobs[1].0, "each spawn is a new job");
    let r = reports(&o.stdout);
    assert_eq!(r.len(), 5, "{}", o.stdout);
    let host = hostname();
    let one = r[0];
    assert_eq!(field(one, "job"), jobs[0].0);
    assert_eq!((field(one, "rank"), field(one, "size"), field(one, "appnum")), ("0", "1", "0"));
    assert_eq!((field(one, "port"), field(one, "cwd"), field(one, "local")), ("port-0", "/", "0/1"));
    // The first job's universe: this host's CPUs.
    let universe = common::allowed_cpus().to_string();
    assert_eq!((field(one, "node"), field(one, "universe")), (host.as_str(), universe.as_str()));
    assert_eq!(field(one, "argv0"), p.to_str().unwrap());
    for (i, line) in r[1..].iter().enumerate() {
        assert_eq!(field(line, "job"), jobs[1].0);
        assert_eq!(field(line, "rank"), i.to_string());
        assert_eq!((field(line, "size"), field(line, "appnum"), field(line, "port")), ("4", "0", "port-1"));
        assert_eq!(field(line, "local"), format!("{i}/4"));
        assert_eq!(field(line, "args"), "child,x,y");
        // No wdir: mpiexec's own directory.
        assert_eq!(field(line, "cwd"), std::env::current_dir().unwrap().to_str().unwrap());
    }
}

#[test]
fn spawn_multiple_numbers_ranks_over_commands() {
    let o = run(&parent_args(&["-n", "1"], &[r"spawn:self|1|wdir=/tmp|child+self|2|env=FOO=bar\nX=1|child"]));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let r = reports(&o.stdout);
    let got: Vec<(&str, &str, &str, &str, &str)> = r
        .iter()
        .map(|l| (field(l, "rank"), field(l, "size"), field(l, "appnum"), field(l, "foo"), field(l, "cwd")))
        .collect();
    let cwd = std::env::current_dir().unwrap();
    let cwd = cwd.to_str().unwrap();
    assert_eq!(got, [("0", "3", "0", "", "/tmp"), ("1", "3", "1", "bar", cwd), ("2", "3", "1", "bar", cwd)]);
}

#[test]
fn info_keys_path_host_and_ignored_ones() {
    let p = probe();
    let dir = p.parent().unwrap().to_str().unwrap().to_owned();
    let host = hostname();
    let cmd1 = format!("spawn:pmi_probe|1|path=/nonexistent:{dir};host=localhost;soft=1:4;map_by=cyclic;other=x|child");
    let cmd2 = format!("spawn:self|1|host={host};map_by=node|child");
    let o = run(&parent_args(&["-n", "1"], &[&cmd1, &cmd2, "spawn:self|1|host=elsewhere.invalid|child"]));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let r = reports(&o.stdout);
    assert_eq!(r.len(), 2, "{}", o.stdout);
    // Found through the path info, run under the name given.
    assert_eq!(field(r[0], "argv0"), "pmi_probe");
    let refused = o.stdout.lines().find(|l| l.starts_with("spawn error: ")).unwrap();
    assert!(refused.contains("info host 'elsewhere.invalid' is not this host"), "{refused}");
}

#[test]
fn refused_requests_start_nothing() {
    let tmp = std::env::temp_dir().join(format!("baton-spawn-test-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    // Passes every check, but its exec fails: the interpreter is missing.
    let script = tmp.join("broken-script");
    std::fs::write(&script, "#!/nonexistent/interpreter\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let broken = format!("spawn:self|2||child-sleep+{}|1||", script.display());
    let o = run(&parent_args(
        &["-n", "1"],
        &[
            "spawn:self|1||child+nosuch|1||",
            "spawn:self|1|wdir=/nonexistent/dir|child",
            "spawn:self|0||child",
            "spawn:self|5000||child",
            "spawn:self|1|env=NOEQUALS|child",
            &broken,
            "children",
        ],
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(o.stderr, "");
    assert!(!o.stdout.contains("child "), "something was started:\n{}", o.stdout);
    let errors: Vec<&str> = o.stdout.lines().filter_map(|l| l.strip_prefix("spawn error: ")).collect();
    assert_eq!(errors.len(), 6, "{}", o.stdout);
    assert_eq!(errors[0], "cannot spawn 'nosuch' (command 2 of 2): no such executable in PATH");
    assert!(errors[1].ends_with(": working directory '/nonexistent/dir' is not a directory"), "{}", errors[1]);
    assert_eq!(errors[2], "cannot spawn: no process was asked for (maxprocs 0)");
    assert_eq!(errors[3], "cannot spawn 5000 processes: at most 4096 per spawn request");
    assert!(errors[4].ends_with(": info env line 'NOEQUALS' is not NAME=VALUE"), "{}", errors[4]);
    assert!(
        errors[5].starts_with(&format!("cannot spawn: cannot run '{}': ", script.display()))
            && errors[5].ends_with("(the job's other processes were killed)"),
        "{}",
        errors[5]
    );
    // The two processes started before the failing exec are gone.
    assert!(o.stdout.contains("other children 0"), "{}", o.stdout);
}

#[test]
fn a_spawned_job_failing_leaves_the_parent_running() {
    let r = start(&parent_args(&["-n", "1"], &["spawn:self|2||child-sleep", "wait-stdin", "spawn:self|1||child"]));
    let o = finish_after_spawned_rank_killed(r, &hostname(), Duration::from_secs(10));
    // Spawning still works afterwards.
    assert_eq!(reports(&o.stdout).len(), 1, "{}", o.stdout);
}

#[test]
fn the_parent_failing_kills_spawned_jobs() {
    let mut r = start(&parent_args(
        &["-n", "1"],
        &["spawn:self|2||child-sleep", "spawn:self|1||child-sleep", "pid", "wait-stdin"],
    ));
    let mut pids = pid_lines(&r.wait_lines("child rank ", 3));
    let parent = pid_lines(&r.wait_lines("rank 0 pid ", 1))[0];
    // SAFETY: the process was started by this test's mpiexec.
    unsafe { libc::kill(parent, libc::SIGKILL) };
    let o = r.finish(Duration::from_secs(10));
    assert_eq!(o.code, Some(137), "{}", o.stderr);
    assert_eq!(o.stderr, format!("mpiexec: rank 0 (pid {parent} on {}) was killed by signal 9 (Killed)\n", hostname()));
    assert!(o.elapsed < Duration::from_secs(3), "{:?}", o.elapsed);
    pids.push(parent);
    assert_all_gone(&pids, Duration::from_millis(200));
}

#[test]
fn abort_in_a_spawned_job_ends_everything() {
    let r =
        start(&parent_args(&["-n", "1"], &["spawn:self|1||child-sleep", "spawn:self|2||child-abort", "wait-stdin"]));
    let o = r.finish(Duration::from_secs(10));
    assert_spawned_abort(&o, Duration::from_millis(200));
}

#[test]
fn a_signal_to_mpiexec_reaches_spawned_jobs() {
    let mut r = start(&parent_args(&["-n", "1"], &["spawn:self|3||child-sleep", "wait-stdin"]));
    let kids = pid_lines(&r.wait_lines("child rank ", 3));
    // SAFETY: signalling the mpiexec this test started.
    unsafe { libc::kill(r.child.id() as i32, libc::SIGTERM) };
    let o = r.finish(Duration::from_secs(10));
    assert_eq!(o.code, Some(128 + libc::SIGTERM), "{}", o.stderr);
    assert_all_gone(&kids, Duration::from_millis(200));
}

#[test]
fn many_spawns_leave_no_descriptors_or_threads_behind() {
    let p = probe();
    let o = run(&["-n", "1", p.to_str().unwrap(), "spawn-loop", "250"]);
    assert_spawn_loop_left_nothing(&o, "mpiexec");
}

#[test]
fn spawn_latency() {
    let p = probe();
    for n in ["1", "4"] {
        let o = run(&["-n", "1", p.to_str().unwrap(), "spawn-time", n, "5"]);
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        let mut lat: Vec<(u128, u128)> = spawn_requests(&o.stdout).iter().map(SpawnRequest::latency).collect();
        assert_eq!(lat.len(), 5);
        eprintln!("spawn of {n}: (request -> last child running, request -> answer) in µs: {lat:?}");
        lat.sort();
        // Generous: a debug build on a loaded machine; the numbers are printed.
        assert!(lat[2].0 < 300_000, "median spawn latency {} µs", lat[2].0);
    }
}
