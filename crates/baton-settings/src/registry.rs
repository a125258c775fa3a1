//! The table: one static per setting, declared in one `registry!` block that also lists them, in
//! documentation order, as [`ALL`].
//!
//! A default is written as a user would write the value, and parsed by the same rules; a doc is
//! one line of the README's table (no full stop), saying what the setting does for the user.

use crate::{Entry, Kind, Meta, OnBad, Optional, Setting, Unit};
use std::path::PathBuf;
use std::time::Duration;

const GIB: usize = 1 << 30;
const TCP: Option<&str> = Some("docs/ARCHITECTURE.md, TCP");
const SHM: Option<&str> = Some("docs/ARCHITECTURE.md, Shared memory");
const WAITING: Option<&str> = Some("docs/ARCHITECTURE.md, Waiting");
const COLLECTIVES: Option<&str> = Some("docs/ARCHITECTURE.md, Collectives");
const MULTI_HOST: Option<&str> = Some("docs/LAUNCHER.md, Multi-host jobs");
const PROGRESS_DOC: Option<&str> = Some("docs/ARCHITECTURE.md, Progress while the application computes");

/// A congestion control setting: `system`, `unpaced` or a kernel algorithm's name (at most 15
/// characters, as the kernel's `TCP_CA_NAME_MAX` allows).
fn congestion_name(s: &str) -> bool {
    (1..=15).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

const CONGESTION: Kind =
    Kind::Text { what: "`system`, `unpaced` or a congestion control algorithm's name", check: Some(congestion_name) };

/// The algorithms of the rooted collectives that have the same two.
const ROOTED: &[&str] = &["linear", "binomial"];

/// Declares the settings and [`ALL`], which lists them in the order written. An entry is
/// `STATIC: Setting<T> = "default" { fields of Meta, }` (`Optional<T>` with what unset means in
/// place of the default), completed from `Meta::LIBRARY` unless it ends with another base
/// (`..Meta::LAUNCHER`); or `STATIC = collective(variable, calls, algorithms);`, the algorithm
/// of a collective.
macro_rules! registry {
    (@decl [$($done:ident)*]) => {
        /// Every setting, in the order the documentation lists them.
        pub static ALL: &[&dyn Entry] = &[$(&$done),*];
    };
    (
        @decl [$($done:ident)*]
        $static:ident = collective($name:literal, $calls:literal, $algos:expr);
        $($rest:tt)*
    ) => {
        #[doc = concat!("`", $name, "`: the algorithm of ", $calls, ".")]
        pub static $static: Setting<&'static str> = Setting::new(
            "auto",
            Meta {
                name: $name,
                kind: Kind::Algorithm { algos: $algos },
                doc: concat!(
                    "forces the algorithm of ",
                    $calls,
                    " (blocking, nonblocking and persistent); `auto` chooses per call"
                ),
                details: COLLECTIVES,
                ..Meta::LIBRARY
            },
        );
        registry!(@decl [$($done)* $static] $($rest)*);
    };
    (
        @decl [$($done:ident)*]
        $(#[$attr:meta])*
        $static:ident: $wrap:ident<$t:ty> = $default:literal { $($field:ident: $value:expr,)* $(..$base:expr)? }
        $($rest:tt)*
    ) => {
        $(#[$attr])*
        pub static $static: $wrap<$t> =
            $wrap::new($default, Meta { $($field: $value,)* ..registry!(@base $($base)?) });
        registry!(@decl [$($done)* $static] $($rest)*);
    };
    (@base) => { Meta::LIBRARY };
    (@base $base:expr) => { $base };
    ($($entries:tt)*) => { registry!(@decl [] $($entries)*); };
}

registry! {
    // ---- Transports -------------------------------------------------------------------------------

    TRANSPORTS: Setting<String> = "shm,tcp" {
        name: "BATON_TRANSPORTS",
        kind: Kind::List { items: Some(&["self", "shm", "tcp"]), what: "transports" },
        doc: "transports ranks may use (a process always reaches itself): by default ranks on one host use shared \
              memory and ranks on different hosts TCP; `tcp` alone sends everything over TCP, even within a host. \
              A rank that no allowed transport reaches is an error at `MPI_Init`",
    }

    TCP_IF: Optional<String> = "automatic" {
        name: "BATON_TCP_IF",
        kind: Kind::List { items: None, what: "interface names, subnets or addresses" },
        doc: "where each rank listens for TCP: interface names (`eth1`), subnets (`10.0.0.0/24`, `fd00::/64`) or \
              addresses, first match wins. Unset: loopback when the whole job is on one host, else the first \
              routable IPv4 address (then IPv6)",
    }

    TCP_EAGER_MAX: Setting<usize> = "128k" {
        name: "BATON_TCP_EAGER_MAX",
        kind: Kind::Size { min: 0, max: GIB, off: false },
        doc: "largest message sent eagerly over TCP; larger ones wait for the matching receive (rendezvous) and \
              stream from the send buffer to the receive buffer on the bulk lanes (`BATON_TCP_STRIPES`)",
        details: TCP,
    }

    TCP_CHUNK: Setting<usize> = "512k" {
        name: "BATON_TCP_CHUNK",
        kind: Kind::Size { min: 4096, max: 1 << 20, off: false },
        doc: "payload of one rendezvous data frame over TCP",
    }

    TCP_STRIPES: Setting<u64> = "1" {
        name: "BATON_TCP_STRIPES",
        kind: Kind::Uint { unit: Unit::Count, min: 0, max: 16 },
        doc: "bulk lanes per pair of ranks: connections, beside the one that carries every message, that carry only \
              the streamed data of large messages (round robin over them: several NICs or flows); 0: that data \
              shares the message connection",
        details: TCP,
    }

    TCP_CONGESTION: Setting<String> = "system" {
        name: "BATON_TCP_CONGESTION",
        kind: CONGESTION,
        doc: "congestion control of the connection that carries messages: `system` keeps the kernel's default, \
              `unpaced` replaces an algorithm that paces its packets (BBR) with cubic (reno where cubic is not \
              allowed), a name (`reno`, `cubic`, `bbr`, …) asks for that one (a warning when the kernel refuses it)",
        details: TCP,
    }

    TCP_BULK_CONGESTION: Setting<String> = "unpaced" {
        name: "BATON_TCP_BULK_CONGESTION",
        kind: CONGESTION,
        doc: "the same for the bulk lanes",
        details: TCP,
    }

    TCP_COALESCE: Setting<usize> = "16k" {
        name: "BATON_TCP_COALESCE",
        kind: Kind::Size { min: 0, max: GIB, off: false },
        doc: "largest message of a burst of nonblocking sends to one rank (with no MPI call between them that \
              waits, tests or probes) that waits to leave with the rest of the burst in one system call: at the \
              next call that waits, tests or probes, or once 64 KiB are queued. The first message of a burst \
              leaves at once; 0: every message does",
        details: TCP,
    }

    TCP_CONNECT_TIMEOUT: Setting<Duration> = "30" {
        name: "BATON_TCP_CONNECT_TIMEOUT",
        kind: Kind::Seconds { min: 0.001, max: 86400.0 },
        doc: "seconds opening a TCP connection may take before the job ends with a message naming the peer",
    }

    // ---- Dynamic processes ------------------------------------------------------------------------

    NAME_DIR: Optional<PathBuf> = "automatic" {
        name: "BATON_NAME_DIR",
        kind: Kind::Path,
        doc: "directory of the name service (`MPI_Publish_name`); unset: `$XDG_RUNTIME_DIR/baton-names`, else \
              `/tmp/baton-names-UID`. It must belong to the user and be closed to others (a port name holds its \
              secret)",
    }

    SPAWN_TIMEOUT: Setting<Duration> = "60" {
        name: "BATON_SPAWN_TIMEOUT",
        kind: Kind::Seconds { min: 0.001, max: 86400.0 },
        doc: "seconds `MPI_Comm_spawn` waits for the started processes to connect before failing with \
              `MPI_ERR_SPAWN`",
    }

    MPIEXEC: Optional<PathBuf> = "automatic" {
        name: "BATON_MPIEXEC",
        kind: Kind::Path,
        doc: "the `mpiexec` a program started without one runs when it first spawns; unset: the one installed \
              beside the library, else `mpiexec` in `PATH`",
    }

    // ---- Shared memory ----------------------------------------------------------------------------

    SHM_EAGER_MAX: Optional<usize> = "16k; 8k for blocking sends" {
        name: "BATON_SHM_EAGER_MAX",
        kind: Kind::Size { min: 0, max: GIB, off: false },
        doc: "largest message sent eagerly through the shared-memory rings; larger ones use rendezvous. Unset, a \
              blocking send (`MPI_Send`, `MPI_Ssend`, `MPI_Rsend`, `MPI_Sendrecv_replace`) to a rank that can copy \
              from its memory goes eagerly only up to 8 KiB, other sends up to 16 KiB; set, it is one limit for \
              all",
        details: SHM,
    }

    SHM_RING_SIZE: Optional<usize> = "32m / (ranks on the host)², within 128k–1m" {
        name: "BATON_SHM_RING_SIZE",
        kind: Kind::Size { min: 8192, max: GIB, off: false },
        doc: "bytes of each per-pair ring, rounded up to a power of two; every rank of a host must see the same \
              value. Rings leased to other jobs' processes are 128 KiB unless it is set",
        details: SHM,
    }

    CMA: Setting<bool> = "1" {
        name: "BATON_CMA",
        kind: Kind::Bool,
        doc: "single-copy reads (`process_vm_readv`) of large messages between ranks of a host; 0: rendezvous data \
              streams through the rings",
        details: SHM,
    }

    COOP_MIN: Setting<usize> = "256k" {
        name: "BATON_COOP_MIN",
        // Not 0: it once meant `off`, and reading it as "every message" would change a job silently.
        kind: Kind::Size { min: 1, max: usize::MAX, off: true },
        doc: "smallest contiguous rendezvous message whose copy the sender shares with the receiver \
              (`process_vm_writev` of chunks while the receiver reads others); `off`: never",
        details: SHM,
    }

    // ---- Waiting ----------------------------------------------------------------------------------

    SPIN_US: Setting<u64> = "200" {
        name: "BATON_SPIN_US",
        kind: Kind::Uint { unit: Unit::Microseconds, min: 0, max: 1_000_000 },
        doc: "least time a blocking call polls before sleeping on its doorbell",
        details: WAITING,
    }

    SPIN_MAX_US: Setting<u64> = "5000" {
        name: "BATON_SPIN_MAX_US",
        kind: Kind::Uint { unit: Unit::Microseconds, min: 0, max: 1_000_000 },
        doc: "most time it polls (the budget adapts between the two to the waits seen); below `BATON_SPIN_US` it \
              means `BATON_SPIN_US`",
        details: WAITING,
    }

    YIELD_EVERY: Setting<u64> = "1" {
        name: "BATON_YIELD_EVERY",
        kind: Kind::Uint { unit: Unit::Count, min: 1, max: 1_000_000 },
        doc: "with more ranks than cores: polls between two `sched_yield` calls",
        details: WAITING,
    }

    PLACE: Setting<&'static str> = "cyclic" {
        name: "BATON_PLACE",
        kind: Kind::Choice { choices: &["cyclic", "block", "off"], aliases: &[("none", "off"), ("0", "off")] },
        doc: "with more ranks than cores: the CPU a rank returns to while it waits. `cyclic` puts the machine's \
              rank *i* on allowed CPU *i* mod *cpus*, `block` consecutive ranks on one CPU, `off` leaves it to the \
              kernel. The affinity mask is not narrowed; a rank whose mask allows one CPU, or whose program \
              changes its mask, is left alone. Being a hint, a bad value is a warning and means `cyclic`",
        details: WAITING,
        on_bad: OnBad::Warn,
    }

    PROGRESS: Setting<&'static str> = "auto" {
        name: "BATON_PROGRESS",
        kind: Kind::Choice {
            choices: &["auto", "thread", "off"],
            aliases: &[("on", "thread"), ("1", "thread"), ("none", "off"), ("0", "off")],
        },
        doc: "who moves messages while the application computes outside MPI: `thread`, a progress thread per \
              process that sleeps on the same doorbells and sockets as a waiting call and takes over large \
              transfers, nonblocking collectives and one-sided requests; `off`, only the application's own MPI \
              calls; `auto`, the thread where the host has more cores than ranks and the process is not bound to one \
              CPU (it then costs the application no core)",
        details: PROGRESS_DOC,
    }

    // ---- Collectives ------------------------------------------------------------------------------
    //
    // Each collective's algorithm names, the general one first: the algorithm choice in
    // `baton-core/src/coll/algo.rs` reads these lists (and maps each name to its `Algo`), so they are
    // written here only.

    COLL_BARRIER = collective("BATON_COLL_BARRIER", "`MPI_Barrier`", &["dissemination", "shm"]);
    COLL_BCAST = collective("BATON_COLL_BCAST", "`MPI_Bcast`", &["binomial", "scatter_allgather", "shm"]);
    COLL_REDUCE = collective("BATON_COLL_REDUCE", "`MPI_Reduce`", &["binomial", "shm"]);
    COLL_ALLREDUCE = collective(
        "BATON_COLL_ALLREDUCE",
        "`MPI_Allreduce`",
        &["recursive_doubling", "rabenseifner", "ring", "reduce_bcast", "shm"]
    );
    COLL_GATHER = collective("BATON_COLL_GATHER", "`MPI_Gather`, `MPI_Gatherv`", ROOTED);
    COLL_SCATTER = collective("BATON_COLL_SCATTER", "`MPI_Scatter`, `MPI_Scatterv`", ROOTED);
    COLL_ALLGATHER = collective(
        "BATON_COLL_ALLGATHER",
        "`MPI_Allgather`",
        &["ring", "bruck", "recursive_doubling", "shm"]
    );
    COLL_ALLGATHERV = collective("BATON_COLL_ALLGATHERV", "`MPI_Allgatherv`", &["ring", "linear"]);
    COLL_ALLTOALL = collective(
        "BATON_COLL_ALLTOALL",
        "`MPI_Alltoall`",
        &["pairwise", "bruck", "mesh", "linear", "shm"]
    );
    COLL_ALLTOALLV = collective("BATON_COLL_ALLTOALLV", "`MPI_Alltoallv`, `MPI_Alltoallw`", &["pairwise", "linear"]);
    COLL_REDUCE_SCATTER = collective(
        "BATON_COLL_REDUCE_SCATTER",
        "`MPI_Reduce_scatter`, `MPI_Reduce_scatter_block`",
        &["reduce_scatterv", "recursive_halving", "pairwise"]
    );
    COLL_SCAN = collective("BATON_COLL_SCAN", "`MPI_Scan`, `MPI_Exscan`", &["recursive_doubling", "linear"]);

    // Read by the collective entry points of the device layer.
    COLL_FALLBACK: Setting<&'static str> = "silent" {
        name: "BATON_COLL_FALLBACK",
        kind: Kind::Choice { choices: &["silent", "warn", "error"], aliases: &[] },
        doc: "what a call does when the algorithm a `BATON_COLL_<NAME>` forces cannot apply to it (a ring \
              allreduce with a non-commutative operation): `silent` runs the general algorithm (the first listed), \
              `warn` does too and says so on stderr, `error` fails the call",
        details: COLLECTIVES,
    }

    // Wired by the collective entry points: this declares the setting and its accessor only.
    // ---- mpiexec ----------------------------------------------------------------------------------

    MPIEXEC_TIMEOUT: Optional<u64> = "none" {
        name: "MPIEXEC_TIMEOUT",
        kind: Kind::Uint { unit: Unit::Seconds, min: 1, max: u32::MAX as u64 },
        doc: "seconds after which `mpiexec` ends the job (exit status 124); `-timeout` overrides it",
        ..Meta::LAUNCHER
    }

    RSH: Setting<String> = "ssh" {
        name: "BATON_RSH",
        kind: Kind::Text { what: "a command", check: None },
        doc: "remote shell `mpiexec` starts other hosts' proxies with, split at blanks (`--rsh` overrides it)",
        details: MULTI_HOST,
        ..Meta::LAUNCHER
    }

    LAUNCH_AGENT: Optional<String> = "this mpiexec" {
        name: "BATON_LAUNCH_AGENT",
        kind: Kind::Text { what: "a path", check: None },
        doc: "the `mpiexec` other hosts run as their proxy (`--launch-agent PATH`, `--prefix DIR` for \
              DIR/bin/mpiexec override it), for installations at different paths",
        details: MULTI_HOST,
        ..Meta::LAUNCHER
    }

    LAUNCH_IF: Optional<String> = "all routable addresses, IPv4 first" {
        name: "BATON_LAUNCH_IF",
        kind: Kind::List { items: None, what: "interface names, subnets or addresses" },
        doc: "interfaces, subnets or addresses through which other hosts reach `mpiexec` (IPv4 and IPv6; `-iface` \
              overrides it)",
        details: MULTI_HOST,
        ..Meta::LAUNCHER
    }

    LAUNCH_FANOUT: Setting<u64> = "32" {
        name: "BATON_LAUNCH_FANOUT",
        kind: Kind::Uint { unit: Unit::Count, min: 1, max: 256 },
        doc: "hosts each launcher process starts itself (the rest through a tree)",
        details: MULTI_HOST,
        ..Meta::LAUNCHER
    }

    /// The lower bound is two heartbeats of the launcher's links (`baton-launch` checks it).
    HEARTBEAT_TIMEOUT: Setting<Duration> = "5" {
        name: "BATON_HEARTBEAT_TIMEOUT",
        kind: Kind::Seconds { min: 1.0, max: 86400.0 },
        doc: "seconds without news after which `mpiexec` declares a host lost",
        details: MULTI_HOST,
        ..Meta::LAUNCHER
    }

    // ---- Compiler wrappers ------------------------------------------------------------------------

    CC: Setting<String> = "cc" {
        name: "BATON_CC",
        kind: Kind::Text { what: "a command", check: None },
        doc: "the C compiler `mpicc` runs",
        ..Meta::WRAPPER
    }

    CXX: Setting<String> = "c++" {
        name: "BATON_CXX",
        kind: Kind::Text { what: "a command", check: None },
        doc: "the C++ compiler `mpicxx` runs",
        ..Meta::WRAPPER
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn congestion_names() {
        for ok in ["system", "unpaced", "cubic", "bbr", "bbr2", "h-tcp", "scalable_x"] {
            assert!(TCP_CONGESTION.parse(ok).is_ok(), "{ok}");
        }
        for bad in ["a b", "bbr;rm", "sixteen_letters_", "cubic,reno"] {
            let e = TCP_CONGESTION.parse(bad).unwrap_err();
            assert!(e.starts_with(&format!("BATON_TCP_CONGESTION={bad} is not `system`")), "{e}");
        }
    }

    #[test]
    fn defaults_read_as_the_library_expects() {
        assert_eq!(TCP_EAGER_MAX.default_value(), 128 * 1024);
        assert_eq!(TCP_CHUNK.default_value(), 512 * 1024);
        assert_eq!(TCP_COALESCE.default_value(), 16 * 1024);
        assert_eq!(COOP_MIN.default_value(), 256 * 1024);
        assert_eq!(TCP_CONNECT_TIMEOUT.default_value(), Duration::from_secs(30));
        assert_eq!(TRANSPORTS.default_value(), "shm,tcp");
        assert_eq!(COOP_MIN.parse("off"), Ok(usize::MAX));
        assert!(COOP_MIN.parse("0").is_err(), "0 once meant off: refused rather than reread");
        assert_eq!(PLACE.parse("none"), Ok("off"));
        assert_eq!(COLL_GATHER.meta.algorithms(), ["linear", "binomial"]);
        assert!(TCP_STRIPES.parse("17").is_err());
        assert!(YIELD_EVERY.parse("0").is_err());
    }
}
