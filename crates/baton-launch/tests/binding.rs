//! CPU binding (`--bind-to`, `-c`, `--report-bindings`), per-host counts (`-N`, `--map-by
//! ppr:N:node`) and the universe size, checked on what the ranks themselves see: each rank is a
//! shell that prints its rank, host, pid and `Cpus_allowed_list` from `/proc/self/status`.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{collect, Done, MPIEXEC};

const REPORT: &str =
    "echo $BATON_RANK $BATON_NODE $$ $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)";

fn mpiexec(args: &[&str]) -> Done {
    let child = Command::new(MPIEXEC)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    collect(child, Instant::now(), Duration::from_secs(30))
}

/// What one rank printed.
#[derive(Debug)]
struct Seen {
    node: String,
    pid: i32,
    cpus: BTreeSet<usize>,
    /// As the kernel wrote it, to compare with `--report-bindings`.
    list: String,
}

/// `0-2,5` as the set of CPUs.
fn parse_list(s: &str) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<usize>().unwrap()..=b.parse().unwrap()),
            None => {
                out.insert(part.parse().unwrap());
            }
        }
    }
    out
}

/// Runs `args` followed by the reporting shell; every rank's view by rank.
fn ranks(args: &[&str]) -> (BTreeMap<u32, Seen>, Done) {
    let mut all = args.to_vec();
    all.extend(["sh", "-c", REPORT]);
    let o = mpiexec(&all);
    assert_eq!(o.code, Some(0), "mpiexec {args:?}: {}", o.stderr);
    let mut seen = BTreeMap::new();
    for line in o.stdout.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 4, "{line}");
        let list = f[3].to_owned();
        seen.insert(
            f[0].parse().unwrap(),
            Seen { node: f[1].to_owned(), pid: f[2].parse().unwrap(), cpus: parse_list(&list), list },
        );
    }
    (seen, o)
}

/// The CPUs this test (and so an unbound rank) may run on.
fn allowed() -> BTreeSet<usize> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap();
    parse_list(line.trim())
}

/// The cores as `--bind-to core` hands them out: the masks of the first ranks until one
/// repeats. They must be disjoint and cover every allowed CPU.
fn core_masks() -> Vec<BTreeSet<usize>> {
    let n = allowed().len() + 1;
    let (seen, _) = ranks(&["--bind-to", "core", "-n", &n.to_string()]);
    let mut cores: Vec<BTreeSet<usize>> = Vec::new();
    for s in seen.values() {
        if cores.contains(&s.cpus) {
            break;
        }
        assert!(cores.iter().all(|c| c.is_disjoint(&s.cpus)), "cores overlap: {cores:?} and {:?}", s.cpus);
        cores.push(s.cpus.clone());
    }
    let union: BTreeSet<usize> = cores.iter().flatten().copied().collect();
    assert_eq!(union, allowed(), "the cores cover the allowed CPUs");
    // From there on the ranks start over on the first core.
    for (i, s) in seen.values().enumerate() {
        assert_eq!(s.cpus, cores[i % cores.len()], "rank {i}");
    }
    cores
}

#[test]
fn bind_to_core_gives_consecutive_ranks_consecutive_cores() {
    let cores = core_masks();
    if allowed().len() > 1 {
        assert!(cores.len() > 1 || cores[0].len() > 1, "{cores:?}");
    }
    // Hydra's spelling, and oversubscription: rank i on core i mod cores.
    let n = cores.len() * 2 + 1;
    let (seen, _) = ranks(&["-bind-to", "core", "-n", &n.to_string()]);
    for (i, s) in seen.values().enumerate() {
        assert_eq!(s.cpus, cores[i % cores.len()], "rank {i}");
    }
}

#[test]
fn no_binding_leaves_the_mask_alone() {
    for flags in [&[][..], &["--bind-to", "none"], &["--bind-to", "none", "-c", "2"]] {
        let mut args = flags.to_vec();
        args.extend(["-n", "3"]);
        let (seen, _) = ranks(&args);
        assert_eq!(seen.len(), 3);
        for s in seen.values() {
            assert_eq!(s.cpus, allowed(), "{flags:?}");
        }
    }
}

#[test]
fn cpus_per_rank_binds_each_rank_to_that_many_cores() {
    let cores = core_masks();
    for per in [2usize, 3] {
        let (seen, _) = ranks(&["-c", &per.to_string(), "-n", "3"]);
        let (same, _) = ranks(&["--map-by", &format!("slot:pe={per}"), "-n", "3"]);
        for (i, s) in seen.values().enumerate() {
            let k = per.min(cores.len());
            let want: BTreeSet<usize> = (0..k).flat_map(|j| cores[(i * k + j) % cores.len()].clone()).collect();
            assert_eq!(s.cpus, want, "-c {per}: rank {i}");
            assert_eq!(same[&(i as u32)].cpus, want, "--map-by slot:pe={per}: rank {i}");
        }
    }
}

#[test]
fn bind_to_socket_covers_whole_cores_of_the_rank_socket() {
    let cores = core_masks();
    let (by_core, _) = ranks(&["--bind-to", "core", "-n", "3"]);
    let (by_socket, _) = ranks(&["--bind-to", "socket", "-n", "3"]);
    for (r, s) in &by_socket {
        assert!(s.cpus.is_superset(&by_core[r].cpus), "rank {r}: socket {:?} lacks its core", s.cpus);
        for c in &cores {
            assert!(c.is_subset(&s.cpus) || c.is_disjoint(&s.cpus), "rank {r}: {:?} splits core {c:?}", s.cpus);
        }
    }
}

/// The `--report-bindings` lines of `stderr` by rank: (pid, host, text after the pid).
fn reports(stderr: &str) -> BTreeMap<u32, (i32, String, String)> {
    let mut out = BTreeMap::new();
    for line in stderr.lines() {
        let rest = line.strip_prefix("mpiexec: rank ").unwrap_or_else(|| panic!("unexpected line: {line}"));
        let (rank, rest) = rest.split_once(" (pid ").unwrap();
        let (pid, rest) = rest.split_once(" on ").unwrap();
        let (host, what) = rest.split_once(") ").unwrap();
        let old = out.insert(rank.parse().unwrap(), (pid.parse().unwrap(), host.to_owned(), what.to_owned()));
        assert!(old.is_none(), "rank {rank} reported twice:\n{stderr}");
    }
    out
}

#[test]
fn report_bindings_says_where_each_rank_runs() {
    let (seen, o) = ranks(&["--bind-to", "core", "--report-bindings", "-n", "3"]);
    let rep = reports(&o.stderr);
    assert_eq!(rep.len(), 3, "{}", o.stderr);
    for (r, s) in &seen {
        let (pid, host, what) = &rep[r];
        assert_eq!((*pid, host.as_str()), (s.pid, s.node.as_str()), "rank {r}");
        assert!(what.starts_with("bound to core"), "{what}");
        let cpus = what.split(": CPUs ").nth(1).unwrap().split(' ').next().unwrap();
        assert_eq!(cpus, s.list, "rank {r}: {what}");
    }
    let (seen, o) = ranks(&["--report-bindings", "-n", "2"]);
    let rep = reports(&o.stderr);
    for (r, s) in &seen {
        assert_eq!(rep[r].2, format!("is not bound: CPUs {}", s.list), "rank {r}");
    }
}

#[test]
fn ranks_per_host_on_two_local_hosts() {
    let hosts = "127.0.0.1,127.0.0.2";
    for flags in [&["-N", "2"][..], &["--npernode", "2"], &["--map-by", "ppr:2:node"]] {
        let mut args = flags.to_vec();
        args.extend(["-hosts", hosts, "--bind-to", "core", "--report-bindings"]);
        let (seen, o) = ranks(&args);
        let nodes: Vec<&str> = seen.values().map(|s| s.node.as_str()).collect();
        assert_eq!(nodes, ["127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.2"], "{flags:?}");
        // Each host binds its own ranks, from its first core on, and reports them.
        let cores = core_masks();
        for (r, s) in &seen {
            assert_eq!(s.cpus, cores[*r as usize % 2 % cores.len()], "{flags:?}: rank {r}");
        }
        let rep = reports(&o.stderr);
        assert_eq!(rep.len(), 4, "{}", o.stderr);
        for (r, s) in &seen {
            assert_eq!((rep[r].0, rep[r].1.as_str()), (s.pid, s.node.as_str()));
        }
    }
    // With -n, the count per host bounds each host's share before the layout starts over.
    let (seen, _) = ranks(&["-N", "1", "-n", "3", "-hosts", hosts]);
    let nodes: Vec<&str> = seen.values().map(|s| s.node.as_str()).collect();
    assert_eq!(nodes, ["127.0.0.1", "127.0.0.2", "127.0.0.1"]);
}

fn universe(args: &[&str]) -> u32 {
    let mut all = args.to_vec();
    all.extend(["sh", "-c", "echo $BATON_UNIVERSE_SIZE"]);
    let o = mpiexec(&all);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let sizes: BTreeSet<u32> = o.stdout.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(sizes.len(), 1, "every rank sees one universe: {}", o.stdout);
    sizes.into_iter().next().unwrap()
}

#[test]
fn universe_size_counts_the_slots_mpiexec_knows() {
    let cpus = allowed().len() as u32;
    assert_eq!(universe(&["-n", "1"]), cpus, "this host's CPUs");
    // An oversubscribed job still has room for itself.
    assert_eq!(universe(&["-n", &(cpus + 2).to_string()]), cpus + 2);
    assert_eq!(universe(&["-host", "localhost:5", "-n", "1"]), 5);
    assert_eq!(universe(&["-hosts", "127.0.0.1:3,127.0.0.2:4", "-n", "2"]), 7);
    assert_eq!(universe(&["-hosts", "127.0.0.1,127.0.0.2", "-N", "3", "-n", "1"]), 6);
}

/// A bound rank's mask holds only its share, so mpiexec tells it the whole its host's ranks were
/// bound within (the wait policy counts those CPUs, not the rank's one); unbound ranks get nothing.
#[test]
fn bound_ranks_learn_the_cpus_their_host_binds_within() {
    let host_cpus = |flags: &[&str]| {
        let mut all = flags.to_vec();
        all.extend(["-n", "2", "sh", "-c", "echo ${BATON_HOST_CPUS:-unset}"]);
        let o = mpiexec(&all);
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        o.stdout.lines().map(|l| l.trim().to_string()).collect::<BTreeSet<_>>()
    };
    let cpus = allowed().len().to_string();
    assert_eq!(host_cpus(&["--bind-to", "core"]), BTreeSet::from([cpus.clone()]));
    assert_eq!(host_cpus(&["-c", "1"]), BTreeSet::from([cpus]));
    assert_eq!(host_cpus(&[]), BTreeSet::from(["unset".to_string()]));
}
