"""MPI implementations: discovery and building of the suite."""
import glob
import os
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

    @property
    def build_dir(self):
        return os.path.join(BENCH_DIR, "build", self.name)

    @property
    def binary(self):
        return os.path.join(self.build_dir, "mpibench")

    def launch(self, n, args):
        return [self.mpiexec] + list(self.flags) + ["-n", str(n), self.binary] + list(args)

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


def parse_mpi_spec(spec):
    """NAME:MPICC:MPIEXEC[:EXTRA MPIEXEC FLAGS]"""
    parts = spec.split(":", 3)
    if len(parts) < 3 or not all(parts[:3]):
        raise ValueError("--add-mpi wants NAME:MPICC:MPIEXEC[:FLAGS], got %r" % spec)
    flags = parts[3].split() if len(parts) > 3 else []
    return MPI(parts[0], parts[1], parts[2], flags)


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


def build_native(log=print):
    out = os.path.join(BENCH_DIR, "build", "native", "limits")
    src = os.path.join(SRC_DIR, "native", "limits.c")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    if _stale(out, [src]):
        cc = shutil.which("cc") or shutil.which("gcc") or "cc"
        cmd = [cc] + CFLAGS + ["-pthread", "-o", out, src]
        log("building machine-limit probes: " + " ".join(cmd))
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            log(p.stderr)
            return None
    return out


def query_version(mpi, timeout=30):
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
