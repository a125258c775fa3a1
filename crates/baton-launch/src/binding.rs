//! Binding ranks to CPUs (`--bind-to`, `-c`/`--cpus-per-rank`, `--report-bindings`).
//!
//! [`Binding`] is what the command line asked for; [`Topology`] is this host's CPUs that mpiexec
//! (or the host's proxy) may use, grouped into cores and sockets; [`Topology::cpus_for`] gives
//! the mask of the host's `i`-th rank. The mask is set between fork and exec, so the program
//! starts on it and `MPI_Init` finds it already narrowed (the library leaves a mask it did not
//! set alone, and its `BATON_PLACE` homing only acts within the mask it started with).
//!
//! Rank `i` of a host takes the cores `i*c .. i*c+c` (c: cpus per rank) in the order of the
//! allowed CPUs, wrapping round when there are more ranks than cores: oversubscription is
//! always allowed, ranks then share cores. Binding to a socket gives the rank every allowed CPU
//! of the sockets of those cores.

use std::fmt::Write as _;

use crate::hosts::ranges;

/// What `--bind-to` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindTo {
    None,
    Core,
    Socket,
}

impl BindTo {
    /// Parses a `--bind-to` value; Open MPI's `:overload-allowed` modifier is accepted (ranks
    /// may always share cores).
    pub fn parse(v: &str) -> Result<BindTo, String> {
        let (base, modifier) = v.split_once(':').unwrap_or((v, ""));
        if !modifier.is_empty() && !modifier.eq_ignore_ascii_case("overload-allowed") {
            return Err(format!("unsupported modifier '{modifier}' in binding '{v}'"));
        }
        match base.to_ascii_lowercase().as_str() {
            "none" => Ok(BindTo::None),
            "core" | "cores" => Ok(BindTo::Core),
            "socket" | "sockets" | "package" => Ok(BindTo::Socket),
            _ => Err(format!("unsupported binding '{v}' (use core, socket or none)")),
        }
    }

    /// The name carried to the proxies; [`BindTo::parse`] reads it back.
    pub fn name(self) -> &'static str {
        match self {
            BindTo::None => "none",
            BindTo::Core => "core",
            BindTo::Socket => "socket",
        }
    }
}

/// The binding asked for, as every host applies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binding {
    pub to: BindTo,
    /// Cores each rank gets (`-c`), at least 1.
    pub cpus_per_rank: u32,
    /// One line per rank on stderr saying where it is bound.
    pub report: bool,
}

impl Binding {
    /// No binding and no report: the kernel places the ranks.
    pub const NONE: Binding = Binding { to: BindTo::None, cpus_per_rank: 1, report: false };

    /// From the command line: `-c N` without `--bind-to` binds to cores, as Open MPI does.
    pub fn from_flags(to: Option<BindTo>, cpus_per_rank: Option<u32>, report: bool) -> Binding {
        let to = to.unwrap_or(if cpus_per_rank.is_some() { BindTo::Core } else { BindTo::None });
        Binding { to, cpus_per_rank: cpus_per_rank.unwrap_or(1).max(1), report }
    }

    /// As mpiexec sent it to a proxy; a name the proxy does not know binds nothing.
    pub fn of_spec(spec: &baton_pmi::tree::LaunchSpec) -> Binding {
        Binding {
            to: BindTo::parse(&spec.bind_to).unwrap_or(BindTo::None),
            cpus_per_rank: spec.cpus_per_rank.max(1),
            report: spec.report_bindings,
        }
    }
}

/// One core: its socket and the allowed CPUs (hardware threads) on it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Core {
    socket: u32,
    /// The core's number in [`Topology::cores`] order, for reports.
    index: usize,
    cpus: Vec<usize>,
}

/// The CPUs a host's ranks may be bound to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// In order of their first CPU.
    cores: Vec<Core>,
}

impl Topology {
    /// `(cpu, socket, core id)` of each allowed CPU; CPUs sharing socket and core id are the
    /// hardware threads of one core.
    pub fn from_cpus(cpus: &[(usize, u32, u32)]) -> Topology {
        let mut cores: Vec<(u32, u32, Vec<usize>)> = Vec::new();
        let mut sorted = cpus.to_vec();
        sorted.sort_unstable();
        for (cpu, socket, core) in sorted {
            match cores.iter_mut().find(|(s, c, _)| *s == socket && *c == core) {
                Some((_, _, list)) => list.push(cpu),
                None => cores.push((socket, core, vec![cpu])),
            }
        }
        let cores = cores.into_iter().enumerate().map(|(index, (socket, _, cpus))| Core { socket, index, cpus });
        Topology { cores: cores.collect() }
    }

    /// This process's allowed CPUs, grouped as sysfs describes them (a CPU whose topology
    /// cannot be read is a core of its own on socket 0).
    pub fn detect() -> Topology {
        let read = |cpu: usize, what: &str| -> Option<u32> {
            let path = format!("/sys/devices/system/cpu/cpu{cpu}/topology/{what}");
            std::fs::read_to_string(path).ok()?.trim().parse().ok()
        };
        let cpus: Vec<(usize, u32, u32)> = baton_transport::sys::allowed_cpus()
            .into_iter()
            .map(|cpu| match (read(cpu, "physical_package_id"), read(cpu, "core_id")) {
                (Some(s), Some(c)) => (cpu, s, c),
                _ => (cpu, 0, u32::MAX - cpu as u32),
            })
            .collect();
        Topology::from_cpus(&cpus)
    }

    /// The mask of the host's rank `local` (0-based among the host's ranks), or `None` when the
    /// rank is not bound.
    pub fn cpus_for(&self, local: u32, b: &Binding) -> Option<Placed> {
        if b.to == BindTo::None || self.cores.is_empty() {
            return None;
        }
        let n = self.cores.len();
        let per = (b.cpus_per_rank as usize).min(n);
        let first = (local as usize).wrapping_mul(per) % n;
        let mine: Vec<&Core> = (0..per).map(|j| &self.cores[(first + j) % n]).collect();
        let mut cpus: Vec<usize> = match b.to {
            BindTo::Socket => {
                let sockets: Vec<u32> = mine.iter().map(|c| c.socket).collect();
                self.cores.iter().filter(|c| sockets.contains(&c.socket)).flat_map(|c| c.cpus.iter().copied()).collect()
            }
            _ => mine.iter().flat_map(|c| c.cpus.iter().copied()).collect(),
        };
        cpus.sort_unstable();
        cpus.dedup();
        let mut sockets: Vec<u32> = mine.iter().map(|c| c.socket).collect();
        sockets.sort_unstable();
        sockets.dedup();
        Some(Placed { to: b.to, cores: mine.iter().map(|c| c.index).collect(), sockets, cpus })
    }
}

/// Where one rank is bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    to: BindTo,
    cores: Vec<usize>,
    sockets: Vec<u32>,
    pub cpus: Vec<usize>,
}

/// The `--report-bindings` line (without `mpiexec: `) of rank `rank` (pid `pid` on `node`); `placed` is `None` for a
/// rank left unbound, whose mask is `unbound` (mpiexec's own).
pub fn report_line(rank: u32, pid: i32, node: &str, placed: Option<&Placed>, unbound: &[usize]) -> String {
    let mut s = format!("rank {rank} (pid {pid} on {node}) ");
    match placed {
        None => {
            let _ = write!(s, "is not bound: CPUs {}", ranges(unbound));
        }
        Some(p) => {
            let what = match p.to {
                BindTo::Socket => format!("socket{} {}", plural(p.sockets.len()), list(&p.sockets)),
                _ => format!("core{} {}", plural(p.cores.len()), list(&p.cores)),
            };
            let _ = write!(s, "bound to {what}: CPUs {}", ranges(&p.cpus));
            if p.to != BindTo::Socket {
                let _ = write!(s, " (socket{} {})", plural(p.sockets.len()), list(&p.sockets));
            }
        }
    }
    s
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn list<T: ToString>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two sockets of two cores with two hardware threads each: CPUs 0-3 are the first threads,
    /// 4-7 their siblings, as Linux numbers them.
    fn two_sockets() -> Topology {
        let cpus: Vec<(usize, u32, u32)> = (0..8).map(|c| (c, (c % 4 / 2) as u32, (c % 2) as u32)).collect();
        Topology::from_cpus(&cpus)
    }

    fn cpus(t: &Topology, local: u32, to: BindTo, per: u32) -> Vec<usize> {
        t.cpus_for(local, &Binding { to, cpus_per_rank: per, report: false }).unwrap().cpus
    }

    #[test]
    fn cores_group_hardware_threads_and_wrap() {
        let t = two_sockets();
        assert_eq!(cpus(&t, 0, BindTo::Core, 1), [0, 4]);
        assert_eq!(cpus(&t, 1, BindTo::Core, 1), [1, 5]);
        assert_eq!(cpus(&t, 2, BindTo::Core, 1), [2, 6]);
        assert_eq!(cpus(&t, 4, BindTo::Core, 1), [0, 4]);
        assert_eq!(cpus(&t, 1, BindTo::Core, 2), [2, 3, 6, 7]);
        // More cores per rank than there are: every core.
        assert_eq!(cpus(&t, 0, BindTo::Core, 9), (0..8).collect::<Vec<_>>());
        assert_eq!(cpus(&t, 0, BindTo::Socket, 1), [0, 1, 4, 5]);
        assert_eq!(cpus(&t, 3, BindTo::Socket, 1), [2, 3, 6, 7]);
        assert_eq!(cpus(&t, 1, BindTo::Socket, 3), (0..8).collect::<Vec<_>>());
        assert!(t.cpus_for(0, &Binding::NONE).is_none());
    }

    #[test]
    fn flags_and_reports() {
        assert_eq!(Binding::from_flags(None, Some(2), false).to, BindTo::Core);
        assert_eq!(Binding::from_flags(None, None, true).to, BindTo::None);
        assert_eq!(Binding::from_flags(Some(BindTo::Socket), Some(2), false).to, BindTo::Socket);
        assert_eq!(BindTo::parse("core:overload-allowed"), Ok(BindTo::Core));
        assert!(BindTo::parse("numa").unwrap_err().contains("'numa'"));
        assert!(BindTo::parse("core:bogus").is_err());
        for b in [BindTo::None, BindTo::Core, BindTo::Socket] {
            assert_eq!(BindTo::parse(b.name()), Ok(b));
        }
        let t = two_sockets();
        let b = Binding { to: BindTo::Core, cpus_per_rank: 2, report: true };
        let p = t.cpus_for(1, &b).unwrap();
        assert_eq!(
            report_line(1, 42, "h", Some(&p), &[]),
            "rank 1 (pid 42 on h) bound to cores 2,3: CPUs 2-3,6-7 (socket 1)"
        );
        assert_eq!(report_line(0, 7, "h", None, &[0, 1, 2, 5]), "rank 0 (pid 7 on h) is not bound: CPUs 0-2,5");
        let p = t.cpus_for(0, &Binding { to: BindTo::Socket, ..b }).unwrap();
        assert_eq!(report_line(0, 7, "h", Some(&p), &[]), "rank 0 (pid 7 on h) bound to socket 0: CPUs 0-1,4-5");
    }
}
