//! The variables `mpiexec` sets for each rank: the launcher-to-rank protocol, not settings.
//!
//! They are declared here so that every `BATON_` name of the code has exactly one declaration;
//! the launcher writes them ([`Protocol::name`]) and the library reads them where it needs them,
//! uncached, since some are removed once read (the secret, the parent's port). A user sets none of
//! them, except [`UNIVERSE_SIZE`] in a program started without `mpiexec`. docs/LAUNCHER.md shows
//! this list (generated, see [`crate::markdown`]).

/// One variable of the protocol.
#[derive(Clone, Copy, Debug)]
pub struct Protocol {
    pub name: &'static str,
    /// Its value, in one line (no full stop).
    pub doc: &'static str,
}

pub const PMI_ADDR: Protocol = Protocol {
    name: "BATON_PMI_ADDR",
    doc: "`127.0.0.1:PORT` of the bootstrap socket on the rank's own host (mpiexec's, or the host proxy's); \
          absent ⇒ singleton",
};
pub const PMI_SECRET: Protocol = Protocol {
    name: "BATON_PMI_SECRET",
    doc: "64 hex digits: the key the ranks authenticate with; `PmiClient::from_env` removes it from the environment",
};
pub const JOB_ID: Protocol =
    Protocol { name: "BATON_JOB_ID", doc: "random non-zero job id (decimal), the same on every host" };
pub const RANK: Protocol = Protocol { name: "BATON_RANK", doc: "the rank in its job" };
pub const SIZE: Protocol = Protocol { name: "BATON_SIZE", doc: "the job's size" };
pub const APPNUM: Protocol = Protocol { name: "BATON_APPNUM", doc: "index of the MPMD segment (`MPI_APPNUM`)" };
pub const UNIVERSE_SIZE: Protocol = Protocol {
    name: "BATON_UNIVERSE_SIZE",
    doc: "`MPI_UNIVERSE_SIZE`: the slots mpiexec knows of, at least the job size: the host list's total, else \
          the CPUs of mpiexec's host it may use; a program started without `mpiexec` may set it (a positive \
          number), as the universe its spawns may fill",
};
pub const LOCAL_RANK: Protocol =
    Protocol { name: "BATON_LOCAL_RANK", doc: "index among the ranks of this host, in global rank order" };
pub const LOCAL_SIZE: Protocol = Protocol { name: "BATON_LOCAL_SIZE", doc: "the number of ranks of this host" };
pub const HOST_CPUS: Protocol = Protocol {
    name: "BATON_HOST_CPUS",
    doc: "only when mpiexec binds (`--bind-to`, `-c`): the CPUs this host's ranks were bound within, all together; \
          a rank's own mask then holds only its share, and its wait policy counts these to tell whether the host \
          is oversubscribed",
};
pub const NODE: Protocol = Protocol {
    name: "BATON_NODE",
    doc: "the host's name as written on the command line or in the host file (single host without `-hosts`: this \
          machine's host name). Equal values ⇔ same host ⇔ shared memory possible; use it rather than \
          `gethostname` (test hosts in network namespaces share one host name)",
};
pub const SHM_FD: Protocol = Protocol {
    name: "BATON_SHM_FD",
    doc: "descriptor number of the host's memfd, shared by exactly the ranks with this `BATON_NODE`",
};
pub const PARENT_PORT: Protocol = Protocol {
    name: "BATON_PARENT_PORT",
    doc: "only in processes started by `MPI_Comm_spawn`: the port name the spawning rank sent (see \"Spawn\"); \
          `MPI_Init` removes it from the environment",
};

/// Every protocol variable, in the order docs/LAUNCHER.md lists them.
pub const ALL: &[Protocol] = &[
    PMI_ADDR,
    PMI_SECRET,
    JOB_ID,
    RANK,
    SIZE,
    APPNUM,
    UNIVERSE_SIZE,
    LOCAL_RANK,
    LOCAL_SIZE,
    HOST_CPUS,
    NODE,
    SHM_FD,
    PARENT_PORT,
];

/// Variables that builds set (`cargo:rustc-env`), read with `env!` at compile time: neither
/// settings nor protocol, named here so that the check of the code's names knows them.
pub const BUILD: &[&str] = &["BATON_STUB_COUNT"];
