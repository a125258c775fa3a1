"""MPI implementations: discovery and building of the suite."""
import copy
import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_DIR = os.path.dirname(BENCH_DIR)
SRC_DIR = os.path.join(BENCH_DIR, "src")
CFLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra"]


@dataclass
class MPI:
    name: str
    mpicc: str
    mpiexec: str
    flags: list = field(default_factory=list)
    env: dict = field(default_factory=dict)
    version: str = ""
    build_error: str = ""
    # the MPI this one is a settings variant of (see variant): it shares
    # that MPI's build
    base: str = ""

    @property
    def build_dir(self):
        return os.path.join(BENCH_DIR, "build", self.base or self.name)

    @property
    def binary(self):
        return os.path.join(self.build_dir, "mpibench")

    def launch(self, n, args):
        return [self.mpiexec] + list(self.flags) + ["-n", str(n), self.binary] + list(args)

    def adapt(self, benches, args):
        """(benches, args) this implementation runs for a job; None to leave the job out."""
        return benches, args

    def run_env(self):
        e = dict(os.environ)
        e.update(self.env)
        return e


def known_mpis():
    """The MPIs this machine has, in the order baton, mpich, openmpi."""
    found = {}
    inst = os.path.join(REPO_DIR, "install", "bin")
    if os.path.exists(os.path.join(inst, "mpicc")):
        found["baton"] = MPI("baton", os.path.join(inst, "mpicc"), os.path.join(inst, "mpiexec"))
    cc, ex = shutil.which("mpicc.mpich"), shutil.which("mpiexec.mpich")
    if cc and ex:
        found["mpich"] = MPI("mpich", cc, ex)
    cc, ex = shutil.which("mpicc.openmpi"), shutil.which("mpiexec.openmpi")
    if cc and ex:
        found["openmpi"] = MPI("openmpi", cc, ex, ["--oversubscribe"],
                               {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                                "OMPI_MCA_rmaps_base_oversubscribe": "1"})
    return found


RAW_TCP_BENCHES = ("pingpong", "bw")
RAW_TCP_PORT = 47177


class RawTCP(MPI):
    """The raw TCP reference (bench/src/native/tcp_pingpong.c) in the place of
    an MPI: same arguments and output as mpibench's pingpong and bw. With
    hosts, the server runs on the second host and the client (which prints the
    results) on the first, both started through the remote-start agent.
    spin: reads busy-poll (rawtcp_spin) instead of sleeping in read()."""

    def __init__(self, spin=False):
        super().__init__("rawtcp_spin" if spin else "rawtcp", "", "",
                         version="raw TCP sockets, %s reads (bench/src/native/tcp_pingpong.c%s)" %
                         (("busy-polled", " --spin") if spin else ("blocking", "")))
        self.spin = spin
        self.hosts, self.rsh = [], None

    @property
    def build_dir(self):
        return os.path.join(BENCH_DIR, "build", "native")

    @property
    def binary(self):
        return os.path.join(self.build_dir, "tcp_pingpong")

    def adapt(self, benches, args):
        keep = [b for b in benches if b in RAW_TCP_BENCHES]
        if not keep or not args:
            return None
        return keep, [",".join(keep)] + list(args[1:]) + (["--spin"] if self.spin else [])

    def launch(self, n, args):
        if not self.hosts:
            return [self.binary] + list(args)
        if len(self.hosts) == 1:
            return [self.rsh, self.hosts[0], self.binary] + list(args)
        # The client retries its connection until the server listens; if it
        # fails anyway, the server (still in accept) is ended with it.
        script = ('rsh=$1 cli=$2 srv=$3 bin=$4 port=$5; shift 5; '
                  '"$rsh" "$srv" "$bin" --server --port "$port" & '
                  '"$rsh" "$cli" "$bin" "$@" --connect "$srv:$port"; rc=$?; '
                  '[ $rc = 0 ] || kill $! 2>/dev/null; wait; exit $rc')
        return ["sh", "-c", script, "sh", self.rsh, self.hosts[0], self.hosts[1], self.binary,
                str(RAW_TCP_PORT)] + list(args)


def apply_transport(found, transport, hosts=None, rsh=None, tcp_if=None, localhost=None):
    """Point every MPI at one transport and at the hosts.

    transport "tcp": Baton with BATON_TRANSPORTS=tcp; MPICH (ch4:ucx) with
    UCX_TLS=tcp and the UCX device; Open MPI with the ob1 PML and only the tcp
    and self BTLs; plus the raw TCP reference "rawtcp". tcp_if: the network
    interface ("lo" by default on one host). hosts: ranks placed round-robin,
    started by rsh (an ssh-compatible command); localhost: this machine's
    name as the hosts see it (MPICH's hydra tells its proxies where to call
    back). Returns the MPIs, rawtcp and rawtcp_spin added in tcp mode."""
    hosts = list(hosts or [])
    if hosts and not rsh:
        raise ValueError("--hosts needs --rsh (an ssh-compatible remote-start command)")
    rsh = os.path.abspath(rsh) if rsh and os.sep in rsh else rsh
    if tcp_if is None and not hosts:
        tcp_if = "lo"
    hl = ",".join(hosts)
    for m in found.values():
        if m.name == "baton":
            if transport == "tcp":
                m.env["BATON_TRANSPORTS"] = "tcp"
                # also as -genv: a remote start does not carry the environment
                m.flags += ["-genv", "BATON_TRANSPORTS", "tcp"]
            if hosts:
                m.flags += ["-hosts", hl, "--rsh", rsh]
        elif m.name == "mpich":
            if transport == "tcp":
                # Debian's MPICH is ch4:ucx: its transports are UCX's.
                m.env["UCX_TLS"] = "tcp"
                if tcp_if:
                    m.env["UCX_NET_DEVICES"] = tcp_if
            if hosts:
                m.flags += ["-hosts", hl, "-launcher", "ssh", "-launcher-exec", rsh]
                if localhost:
                    m.flags += ["-localhost", localhost]
        elif m.name == "openmpi":
            if transport == "tcp":
                m.flags += ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self"]
                if tcp_if:
                    m.flags += ["--mca", "btl_tcp_if_include", tcp_if]
            if hosts:
                # Binding is decided per host; hosts that are namespaces of one
                # machine would all get core 0 and time-slice (4 ms a message).
                m.flags += ["--host", hl, "--map-by", "node", "--bind-to", "none", "--mca", "plm_rsh_agent", rsh]
    if transport == "tcp":
        for spin in (False, True):
            raw = RawTCP(spin)
            raw.hosts, raw.rsh = hosts, rsh
            found[raw.name] = raw
    return found


def parse_mpi_spec(spec):
    """NAME:MPICC:MPIEXEC[:EXTRA MPIEXEC FLAGS]"""
    parts = spec.split(":", 3)
    if len(parts) < 3 or not all(parts[:3]):
        raise ValueError("--add-mpi wants NAME:MPICC:MPIEXEC[:FLAGS], got %r" % spec)
    flags = parts[3].split() if len(parts) > 3 else []
    return MPI(parts[0], parts[1], parts[2], flags)


VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_variant(spec):
    """An --mpi entry: NAME, or NAME:VAR=VAL[:VAR2=VAL2...] (the MPI NAME
    launched with those environment variables), optionally preceded by
    LABEL= to name the column.  Returns (label, name, env); the label is
    NAME for a plain entry, else LABEL or NAME[VAR=VAL:VAR2=VAL2].  Values
    cannot hold ':' or ','."""
    spec = spec.strip()
    parts = spec.split(":")
    head, settings = parts[0], parts[1:]
    label = None
    if "=" in head:
        label, head = head.split("=", 1)
        if not label or not settings:
            raise ValueError("--mpi %r: LABEL= only names a variant, LABEL=NAME:VAR=VAL" % spec)
    if not head:
        raise ValueError("--mpi %r: no MPI name" % spec)
    env = {}
    for kv in settings:
        var, eq, val = kv.partition("=")
        if not eq or not VAR_NAME.fullmatch(var):
            raise ValueError("--mpi %r: %r is not VAR=VALUE" % (spec, kv))
        if var in env:
            raise ValueError("--mpi %r: %s set twice" % (spec, var))
        env[var] = val
    if not settings:
        return head, head, {}
    return label or "%s[%s]" % (head, ":".join("%s=%s" % kv for kv in env.items())), head, env


def variant(base, label, env):
    """The MPI `base` launched with the environment settings env, under its
    own name (a column of its own in the results).  The settings go into
    the launch environment and, where the launcher has an option for it,
    onto its command line, so that ranks started on other hosts get them
    too."""
    if not env:
        return base
    m = copy.deepcopy(base)
    m.name, m.base = label, base.base or base.name
    m.env.update(env)
    kind = m.base
    for var, val in env.items():
        if kind in ("baton", "mpich"):
            m.flags += ["-genv", var, val]
        elif kind == "openmpi":
            m.flags += ["-x", "%s=%s" % (var, val)]
    return m


def _sources():
    return sorted(glob.glob(os.path.join(SRC_DIR, "*.c")) + glob.glob(os.path.join(SRC_DIR, "*.h")))


def _stale(target, sources):
    if not os.path.exists(target):
        return True
    t = os.path.getmtime(target)
    return any(os.path.getmtime(s) > t for s in sources)


def build(mpi, log=print):
    """Compile bench/src/*.c with the MPI's mpicc into bench/build/<mpi>/.
    Sets mpi.build_error on failure; returns True on success."""
    if isinstance(mpi, RawTCP):
        if not build_native(log, "tcp_pingpong"):
            mpi.build_error = "build failed: see the compiler output above"
            return False
        return True
    os.makedirs(mpi.build_dir, exist_ok=True)
    srcs = _sources()
    if not _stale(mpi.binary, srcs):
        return True
    cmd = [mpi.mpicc] + CFLAGS + ["-o", mpi.binary] + [s for s in srcs if s.endswith(".c")] + ["-lm"]
    log("building %s: %s" % (mpi.name, " ".join(cmd)))
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=mpi.run_env())
    except (OSError, subprocess.TimeoutExpired) as e:
        mpi.build_error = "build failed: %s" % e
        return False
    with open(os.path.join(mpi.build_dir, "build.log"), "w") as f:
        f.write(" ".join(cmd) + "\n" + p.stdout + p.stderr)
    if p.returncode != 0:
        lines = [l for l in p.stderr.splitlines() if "error" in l] or p.stderr.splitlines() or ["?"]
        mpi.build_error = "build failed: " + lines[0][:250]
        return False
    if p.stderr.strip():
        log("warnings building %s, see %s/build.log" % (mpi.name, mpi.build_dir))
    return True


def build_native(log=print, name="limits"):
    out = os.path.join(BENCH_DIR, "build", "native", name)
    src = os.path.join(SRC_DIR, "native", name + ".c")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    if _stale(out, [src]):
        cc = shutil.which("cc") or shutil.which("gcc") or "cc"
        cmd = [cc] + CFLAGS + ["-pthread", "-o", out, src, "-lm"]
        log("building native %s: %s" % (name, " ".join(cmd)))
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            log(p.stderr)
            return None
    return out


def query_version(mpi, timeout=30):
    if isinstance(mpi, RawTCP):
        return mpi.version
    try:
        p = subprocess.run(mpi.launch(1, ["version"]), capture_output=True, text=True, timeout=timeout,
                           env=mpi.run_env(), start_new_session=True)
        for line in p.stdout.splitlines():
            if line.startswith('{"version"'):
                import json
                return json.loads(line)["version"].strip()
        return "unknown (version query exit %d)" % p.returncode
    except (OSError, subprocess.TimeoutExpired) as e:
        return "unknown (%s)" % e.__class__.__name__
