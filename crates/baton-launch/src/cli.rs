//! Command-line parsing for `mpiexec` / `mpirun`.
//!
//! The command line is a list of MPMD segments separated by `:`. Options
//! before a segment's program apply either to that segment ([`Segment`]:
//! `-n`, `-env`, `-wdir`) or to the whole job ([`Options`]: `-genv`, `-x`,
//! `-l`, `--timeout`, hosts and placement), in the spirit of both Hydra and
//! Open MPI.

use std::path::PathBuf;
use std::time::Duration;

use crate::binding::{BindTo, Binding};
use crate::hosts::{self, HostSpec, Mapping};

pub const USAGE: &str = "\
Usage: mpiexec [global and local options] PROGRAM [ARGS...] [ : [local options] PROGRAM [ARGS...] ]...

Runs PROGRAM as an MPI job on this host, or on the hosts given. Segments
separated by ':' form an MPMD job whose ranks are numbered consecutively
across segments.

Local options (apply to the segment they precede):
  -n N, -np N, --np N       number of ranks for this segment (default 1)
  -env NAME VALUE           set NAME=VALUE for this segment's ranks
  -wdir DIR, --wdir DIR, -cwd DIR
                            working directory of this segment's ranks

Global options (apply to all segments):
  -genv NAME VALUE          set NAME=VALUE for every rank
  -x NAME=VALUE             set NAME=VALUE for every rank (Open MPI style)
  -x NAME                   pass mpiexec's current value of NAME
  -genvall, -envall         pass mpiexec's whole environment (the default)
  -gwdir DIR                default working directory for every segment
  --oversubscribe           accepted and ignored (more ranks than cores is
                            always allowed)
  -l, -prepend-rank, --tag-output
                            prefix every output line with '[RANK] '
  --timeout SECS            kill the job and exit with status 124 after SECS
                            seconds (default: $MPIEXEC_TIMEOUT, else none)
  -hosts H1,H2, -host H1:4,H2:2
                            hosts to run on, optionally with slot counts
  -hostfile FILE, -f FILE, -machinefile FILE
                            file listing hosts: 'host', 'host:N' or
                            'host slots=N' per line, '#' comments
  -ppn N, -N N, --npernode N, --map-by ppr:N:node
                            N ranks per host (overrides the slot counts); a
                            segment without -n then runs N ranks on every host
  --map-by slot|node        fill each host's slots in turn (slot, default) or
                            place ranks round-robin over hosts (node); a
                            ':pe=N' modifier is the same as -c N
  --bind-to core|socket|none, -bind-to ...
                            bind each rank to its cores (consecutive ranks of
                            a host on consecutive cores), to their sockets,
                            or not at all (default, unless -c is given)
  -c N, --cpus-per-rank N   N cores for each rank (binds to cores unless
                            --bind-to says otherwise)
  --report-bindings         print each rank's binding on stderr
  -rr, --bynode             same as --map-by node
  --rsh CMD, -launcher-exec CMD
                            remote shell for other hosts, run as
                            'CMD HOST COMMAND' (default: $BATON_RSH, else ssh)
  --launch-agent PATH       the mpiexec other hosts run as their proxy
                            (default: $BATON_LAUNCH_AGENT, else this
                            mpiexec's own absolute path)
  --prefix DIR              the same as --launch-agent DIR/bin/mpiexec
  -iface IF                 reach mpiexec at the addresses IF selects:
                            interface names, subnets ADDR/BITS or addresses,
                            comma-separated (default: $BATON_LAUNCH_IF, else
                            all routable ones, IPv4 first)
  --version                 print the version and exit
  -h, --help                print this help and exit

Long options also accept the --name=value form. '--' ends the options.";

/// One MPMD command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub nprocs: u32,
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub wdir: Option<PathBuf>,
}

/// A fully parsed job description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub segments: Vec<Segment>,
    pub genv: Vec<(String, String)>,
    pub gwdir: Option<PathBuf>,
    pub tag_output: bool,
    pub timeout: Option<Duration>,
    /// Hosts as given, repeated names merged; empty: this host only.
    pub hosts: Vec<HostSpec>,
    pub ppn: Option<u32>,
    pub mapping: Mapping,
    pub rsh: Option<String>,
    pub iface: Option<String>,
    /// The mpiexec that other hosts run as their proxy (`--launch-agent`, `--prefix`).
    pub agent: Option<String>,
    pub binding: Binding,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Run(Box<Options>),
    Help,
    Version,
}

/// A usage error: message for stderr and the exit status to use.
#[derive(Debug, PartialEq, Eq)]
pub struct CliError {
    pub msg: String,
    pub status: i32,
}

fn usage_err(msg: impl Into<String>) -> CliError {
    CliError { msg: msg.into(), status: 2 }
}

#[derive(Default)]
struct Pending {
    nprocs: Option<u32>,
    program: Option<String>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    wdir: Option<PathBuf>,
}

impl Pending {
    /// `default_n`: the number of ranks without `-n`.
    fn finish(self, default_n: u32) -> Result<Segment, CliError> {
        let Some(program) = self.program else {
            return Err(usage_err("missing program to run (see mpiexec --help)"));
        };
        let nprocs = self.nprocs.unwrap_or(default_n);
        Ok(Segment { nprocs, program, args: self.args, env: self.env, wdir: self.wdir })
    }
}

/// A number of at least 1 for option `name`; `what` names it in the error.
fn positive(v: &str, name: &str, what: &str) -> Result<u32, CliError> {
    match v.parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(usage_err(format!("invalid {what} '{v}' for '{name}'"))),
    }
}

/// Parses `args` (without argv[0]). `env_timeout` is `$MPIEXEC_TIMEOUT`, which `-timeout`
/// overrides.
pub fn parse(args: &[String], env_timeout: Option<Duration>) -> Result<Command, CliError> {
    // Finished once the per-host count (which may come later) is known.
    let mut segments: Vec<Pending> = Vec::new();
    let mut cur = Pending::default();
    let mut genv = Vec::new();
    let mut gwdir = None;
    let mut tag_output = false;
    let mut timeout = None;
    let mut host_list = Vec::new();
    let mut ppn = None;
    let mut mapping = Mapping::Block;
    let mut rsh = None;
    let mut iface = None;
    let mut agent = None;
    let mut bind_to = None;
    let mut cpus_per_rank = None;
    let mut report_bindings = false;
    let mut it = args.iter();
    let mut options_ended = false;

    while let Some(arg) = it.next() {
        if arg == ":" {
            if cur.program.is_none() {
                return Err(usage_err("missing program to run (see mpiexec --help)"));
            }
            segments.push(std::mem::take(&mut cur));
            options_ended = false;
            continue;
        }
        if cur.program.is_some() {
            cur.args.push(arg.clone());
            continue;
        }
        if options_ended || !arg.starts_with('-') || arg == "-" {
            cur.program = Some(arg.clone());
            continue;
        }
        if arg == "--" {
            options_ended = true;
            continue;
        }
        // `--name=value` for long options; short ones never contain '='.
        let (name, mut inline) = match arg.split_once('=') {
            Some((n, v)) if arg.starts_with("--") => (n, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = |what: &str| -> Result<String, CliError> {
            match inline.take() {
                Some(v) => Ok(v),
                None => it.next().cloned().ok_or_else(|| usage_err(format!("option '{name}' needs {what}"))),
            }
        };
        match name {
            "-n" | "-np" | "--np" | "--n" => {
                cur.nprocs = Some(positive(&value("a number of ranks")?, name, "number of ranks")?);
            }
            "-env" | "--env" => {
                let n = value("a name and a value")?;
                let v = value("a name and a value")?;
                cur.env.push((check_env_name(&n)?, v));
            }
            "-genv" | "--genv" => {
                let n = value("a name and a value")?;
                let v = value("a name and a value")?;
                genv.push((check_env_name(&n)?, v));
            }
            "-x" => {
                let spec = value("NAME or NAME=VALUE")?;
                match spec.split_once('=') {
                    Some((n, v)) => genv.push((check_env_name(n)?, v.to_owned())),
                    None => {
                        let n = check_env_name(&spec)?;
                        if let Ok(v) = std::env::var(&n) {
                            genv.push((n, v));
                        }
                    }
                }
            }
            // Accepted for compatibility: both are what mpiexec always does.
            "-genvall" | "-envall" | "--genvall" | "--envall" | "--oversubscribe" | "-oversubscribe" => {}
            "-wdir" | "--wdir" | "-cwd" | "--cwd" => {
                cur.wdir = Some(PathBuf::from(value("a directory")?));
            }
            "-gwdir" | "--gwdir" => gwdir = Some(PathBuf::from(value("a directory")?)),
            "-l" | "-prepend-rank" | "--prepend-rank" | "-tag-output" | "--tag-output" => {
                tag_output = true;
            }
            "-timeout" | "--timeout" => timeout = Some(parse_timeout(&value("seconds")?)?),
            "-hosts" | "--hosts" | "-host" | "--host" => {
                let list = value("a host list")?;
                host_list.extend(hosts::parse_host_list(&list).map_err(|e| usage_err(format!("{name}: {e}")))?);
            }
            "-hostfile" | "--hostfile" | "-f" | "-machinefile" | "--machinefile" => {
                let path = value("a file name")?;
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| usage_err(format!("cannot read host file '{path}': {e}")))?;
                host_list.extend(hosts::parse_hostfile(&text, &path).map_err(usage_err)?);
            }
            "-ppn" | "--ppn" | "-npernode" | "--npernode" | "-N" => {
                ppn = Some(positive(&value("a number of ranks per host")?, name, "number of ranks per host")?);
            }
            "--map-by" | "-map-by" => {
                let v = value("slot, node or ppr:N:node")?;
                let m = parse_map_by(&v).map_err(|e| usage_err(format!("{e} for '{name}'")))?;
                mapping = m.mapping;
                ppn = m.ppn.or(ppn);
                cpus_per_rank = m.pe.or(cpus_per_rank);
            }
            "--bind-to" | "-bind-to" => {
                let v = value("core, socket or none")?;
                bind_to = Some(BindTo::parse(&v).map_err(|e| usage_err(format!("{e} for '{name}'")))?);
            }
            "-c" | "--cpus-per-rank" | "-cpus-per-rank" | "--cpus-per-proc" | "-cpus-per-proc" => {
                cpus_per_rank = Some(positive(&value("a number of cores")?, name, "number of cores per rank")?);
            }
            "--report-bindings" | "-report-bindings" => report_bindings = true,
            "-rr" | "--bynode" | "-bynode" => mapping = Mapping::Cyclic,
            "--byslot" | "-byslot" => mapping = Mapping::Block,
            "--rsh" | "-rsh" | "-launcher-exec" | "--launcher-exec" => {
                let v = value("a command")?;
                if v.split_whitespace().next().is_none() {
                    return Err(usage_err(format!("empty remote shell command for '{name}'")));
                }
                rsh = Some(v);
            }
            "-iface" | "--iface" => iface = Some(value("an interface name")?),
            "--launch-agent" | "-launch-agent" => {
                let v = value("the path of mpiexec on the other hosts")?;
                if v.trim().is_empty() {
                    return Err(usage_err(format!("empty path for '{name}'")));
                }
                agent = Some(v);
            }
            "--prefix" | "-prefix" => {
                let v = value("the installation directory on the other hosts")?;
                if v.trim().is_empty() {
                    return Err(usage_err(format!("empty directory for '{name}'")));
                }
                agent = Some(format!("{}/bin/mpiexec", v.trim_end_matches('/')));
            }
            "-h" | "-help" | "--help" => return Ok(Command::Help),
            "-version" | "--version" | "-V" => return Ok(Command::Version),
            _ => return Err(usage_err(format!("unknown option '{arg}' (see mpiexec --help)"))),
        }
        if inline.is_some() {
            return Err(usage_err(format!("option '{name}' does not take a value")));
        }
    }
    segments.push(cur);
    let host_list_len = hosts::merge(&host_list).len().max(1) as u32;
    // With a per-host count, a segment without -n fills every host with it (Open MPI's -N).
    let default_n = ppn.map_or(1, |n| n.saturating_mul(host_list_len));
    let segments = segments.into_iter().map(|p| p.finish(default_n)).collect::<Result<Vec<_>, _>>()?;

    let timeout = timeout.or(env_timeout);
    let total: u64 = segments.iter().map(|s| u64::from(s.nprocs)).sum();
    if total > u64::from(u32::MAX / 2) {
        return Err(usage_err(format!("{total} ranks is too many")));
    }
    let hosts = hosts::merge(&host_list);
    let binding = Binding::from_flags(bind_to, cpus_per_rank, report_bindings);
    Ok(Command::Run(Box::new(Options {
        segments,
        genv,
        gwdir,
        tag_output,
        timeout,
        hosts,
        ppn,
        mapping,
        rsh,
        iface,
        agent,
        binding,
    })))
}

/// What `--map-by` says.
#[derive(Debug, PartialEq, Eq)]
struct MapBy {
    mapping: Mapping,
    /// `ppr:N:node`: N ranks per host.
    ppn: Option<u32>,
    /// The `:pe=N` modifier: cores per rank.
    pe: Option<u32>,
}

/// `slot`, `core`, `node` or `ppr:N:node`, each optionally followed by Open MPI's modifiers
/// `:pe=N` (cores per rank) and `:oversubscribe` (always allowed).
fn parse_map_by(v: &str) -> Result<MapBy, String> {
    let lower = v.to_ascii_lowercase();
    let mut parts = lower.split(':');
    let mut m = MapBy { mapping: Mapping::Block, ppn: None, pe: None };
    match parts.next().unwrap_or("") {
        "slot" | "core" => {}
        "node" => m.mapping = Mapping::Cyclic,
        "ppr" => {
            let n = parts.next().unwrap_or("");
            let n = n.parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(|| format!("invalid count '{n}' in '{v}'"))?;
            match parts.next() {
                Some("node") => m.ppn = Some(n),
                Some(other) => return Err(format!("unsupported resource '{other}' in '{v}' (use ppr:N:node)")),
                None => return Err(format!("'{v}' lacks the resource (use ppr:N:node)")),
            }
        }
        _ => return Err(format!("unsupported mapping '{v}' (use slot, node or ppr:N:node)")),
    }
    for modifier in parts {
        if let Some(n) = modifier.strip_prefix("pe=") {
            let n = n.parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(|| format!("invalid pe= count in '{v}'"))?;
            m.pe = Some(n);
        } else if modifier != "oversubscribe" {
            return Err(format!("unsupported modifier '{modifier}' in mapping '{v}'"));
        }
    }
    Ok(m)
}

fn check_env_name(n: &str) -> Result<String, CliError> {
    if n.is_empty() || n.contains('=') || n.contains('\0') {
        return Err(usage_err(format!("invalid environment variable name '{n}'")));
    }
    Ok(n.to_owned())
}

fn parse_timeout(s: &str) -> Result<Duration, CliError> {
    match s.trim().parse::<u64>() {
        Ok(secs) if secs > 0 => Ok(Duration::from_secs(secs)),
        _ => Err(usage_err(format!("invalid timeout '{s}' (expected a positive number of seconds)"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Command, CliError> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        parse(&args, None)
    }

    fn run(args: &[&str]) -> Options {
        match p(args).unwrap() {
            Command::Run(o) => *o,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn basic_and_aliases() {
        for flag in ["-n", "-np", "--np"] {
            let o = run(&[flag, "3", "prog", "-n", "x"]);
            assert_eq!(o.segments.len(), 1);
            assert_eq!(o.segments[0].nprocs, 3);
            assert_eq!(o.segments[0].program, "prog");
            assert_eq!(o.segments[0].args, ["-n", "x"]);
        }
        assert_eq!(run(&["--np=4", "a"]).segments[0].nprocs, 4);
        assert_eq!(run(&["a"]).segments[0].nprocs, 1);
        assert_eq!(run(&["--oversubscribe", "-n", "9", "a"]).segments[0].nprocs, 9);
        assert_eq!(run(&["-n", "2", "--", "-weird"]).segments[0].program, "-weird");
    }

    #[test]
    fn mpmd_env_wdir_and_globals() {
        let o = run(&[
            "-l",
            "-genv",
            "G",
            "1",
            "-x",
            "X=2",
            "-n",
            "2",
            "-env",
            "L",
            "3",
            "-wdir",
            "/tmp",
            "a",
            "arg",
            ":",
            "--timeout",
            "7",
            "-n",
            "3",
            "b",
        ]);
        assert!(o.tag_output);
        assert_eq!(o.timeout, Some(Duration::from_secs(7)));
        assert_eq!(o.genv, [("G".into(), "1".into()), ("X".into(), "2".into())]);
        assert_eq!(o.segments.len(), 2);
        assert_eq!(o.segments[0].env, [("L".into(), "3".into())]);
        assert_eq!(o.segments[0].wdir, Some(PathBuf::from("/tmp")));
        assert_eq!(o.segments[0].args, ["arg"]);
        assert_eq!(o.segments[1].nprocs, 3);
        assert_eq!(o.segments[1].wdir, None);
    }

    #[test]
    fn errors() {
        assert_eq!(p(&["--bogus", "a"]).unwrap_err().status, 2);
        assert!(p(&["-n"]).is_err());
        assert!(p(&["-n", "0", "a"]).is_err());
        assert!(p(&["-n", "x", "a"]).is_err());
        assert!(p(&["-n", "2"]).is_err());
        assert!(p(&["a", ":"]).is_err());
        assert!(p(&["--timeout", "0", "a"]).is_err());
        assert!(p(&["-l=3", "a"]).is_err());
        assert!(p(&["--tag-output=3", "a"]).is_err());
        assert!(p(&["-hosts", "a:0", "x"]).is_err());
        assert!(p(&["-ppn", "0", "x"]).is_err());
        assert!(p(&["--map-by", "socket", "x"]).is_err());
        assert!(p(&["--map-by", "ppr:0:node", "x"]).is_err());
        assert!(p(&["--map-by", "ppr:2:socket", "x"]).unwrap_err().msg.contains("'socket'"));
        assert!(p(&["--map-by", "ppr:2", "x"]).is_err());
        assert!(p(&["--map-by", "slot:pe=0", "x"]).is_err());
        assert!(p(&["--map-by", "slot:span", "x"]).is_err());
        assert!(p(&["--bind-to", "numa", "x"]).unwrap_err().msg.contains("--bind-to"));
        assert!(p(&["-c", "0", "x"]).is_err());
        assert!(p(&["-N", "x"]).is_err());
        assert!(p(&["--rsh", " ", "x"]).is_err());
        assert!(p(&["-hostfile", "/nonexistent/hf", "x"]).unwrap_err().msg.contains("/nonexistent/hf"));
        assert_eq!(p(&["--help"]).unwrap(), Command::Help);
        assert_eq!(p(&["--version", "a"]).unwrap(), Command::Version);
    }

    #[test]
    fn env_timeout() {
        let args = vec!["a".to_string()];
        let Command::Run(o) = parse(&args, Some(Duration::from_secs(5))).unwrap() else { panic!() };
        assert_eq!(o.timeout, Some(Duration::from_secs(5)));
        let args = vec!["--timeout".into(), "2".into(), "a".into()];
        let Command::Run(o) = parse(&args, Some(Duration::from_secs(5))).unwrap() else { panic!() };
        assert_eq!(o.timeout, Some(Duration::from_secs(2)));
    }

    #[test]
    fn hosts_and_placement_flags() {
        let o = run(&["-hosts", "a:2,b", "-host", "a", "-ppn", "3", "--map-by", "node", "--rsh", "ssh -x", "x"]);
        assert_eq!(
            o.hosts,
            [HostSpec { name: "a".into(), slots: Some(3) }, HostSpec { name: "b".into(), slots: None }]
        );
        assert_eq!(o.ppn, Some(3));
        assert_eq!(o.mapping, Mapping::Cyclic);
        assert_eq!(o.rsh.as_deref(), Some("ssh -x"));
        assert_eq!(run(&["-rr", "--byslot", "x"]).mapping, Mapping::Block);
        assert_eq!(run(&["--map-by=node", "-iface", "eth1", "x"]).iface.as_deref(), Some("eth1"));
        assert_eq!(run(&["--launch-agent", "/opt/b/bin/mpiexec", "x"]).agent.as_deref(), Some("/opt/b/bin/mpiexec"));
        assert_eq!(run(&["--prefix=/opt/b/", "x"]).agent.as_deref(), Some("/opt/b/bin/mpiexec"));
        assert_eq!(run(&["x"]).agent, None);
        assert!(run(&["x"]).hosts.is_empty());
    }

    #[test]
    fn per_host_counts_and_binding_flags() {
        // A per-host count without -n runs that many on every host.
        for flags in [&["-N", "2"][..], &["--npernode", "2"], &["-ppn", "2"], &["--map-by", "ppr:2:node"]] {
            let mut args = flags.to_vec();
            args.extend(["-hosts", "a,b,c", "x"]);
            let o = run(&args);
            assert_eq!((o.ppn, o.segments[0].nprocs), (Some(2), 6), "{flags:?}");
        }
        assert_eq!(run(&["-N", "3", "x"]).segments[0].nprocs, 3);
        assert_eq!(run(&["-N", "2", "-hosts", "a,b", "-n", "3", "x"]).segments[0].nprocs, 3);
        // Every segment without -n, whichever segment the count came with.
        let o = run(&["-hosts", "a,b", "x", ":", "-N", "2", "y", ":", "-n", "1", "z"]);
        assert_eq!(o.segments.iter().map(|s| s.nprocs).collect::<Vec<_>>(), [4, 4, 1]);
        assert_eq!(run(&["x"]).binding, Binding::NONE);
        let b = run(&["--bind-to", "core", "--report-bindings", "x"]).binding;
        assert_eq!(b, Binding { to: BindTo::Core, cpus_per_rank: 1, report: true });
        assert_eq!(run(&["-bind-to", "socket", "x"]).binding.to, BindTo::Socket);
        assert_eq!(run(&["--bind-to=none", "-c", "2", "x"]).binding.to, BindTo::None);
        for flags in [&["-c", "2"][..], &["--cpus-per-rank", "2"], &["--cpus-per-proc=2"], &["--map-by", "slot:PE=2"]] {
            let mut args = flags.to_vec();
            args.push("x");
            assert_eq!(run(&args).binding, Binding { to: BindTo::Core, cpus_per_rank: 2, report: false }, "{flags:?}");
        }
        let o = run(&["--map-by", "ppr:1:node:pe=2:oversubscribe", "x"]);
        assert_eq!((o.ppn, o.binding.cpus_per_rank, o.mapping), (Some(1), 2, Mapping::Block));
        assert_eq!(run(&["--map-by", "node:pe=3", "x"]).mapping, Mapping::Cyclic);
    }
}
