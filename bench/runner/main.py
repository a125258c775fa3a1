"""bench/run: build and run the benchmark suite on several MPIs, interleaved."""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time

from . import analysis, mpis, report

# Jobs of the one-sided suite: (job name, benchmarks, all ranks or 2, sizes:
# a key of make_jobs' rma table; the atomics other than the accumulate are
# always 8 bytes).  A crash ends the rest of its job and keeps the job from
# later rounds, so the jobs are small and compare-and-swap (which Open MPI
# 4.1's default osc/rdma component crashes on, on shared memory) runs alone.
RMA_JOBS = [("rma_lat", analysis.RMA_LAT, False, "lat"), ("rma_bw", analysis.RMA_BW, False, "bw"),
            ("rma_atomic", ["rma_acc_lat", "rma_fop_lat"], False, "acc"), ("rma_cas", ["rma_cas_lat"], False, "one"),
            ("rma_fop_contended", ["rma_fop_contended"], True, "one"),
            ("rma_cas_contended", ["rma_cas_contended"], True, "one"), ("rma_halo", ["rma_halo"], True, "halo")]
# Jobs of the overlap group: a crash ends only its own job.
OVERLAP_JOBS = [("overlap", ["overlap_fixed", "overlap_daxpy"]),
                ("overlap_wait", ["overlap_sender", "overlap_receiver"]),
                ("overlap_coll", ["overlap_ibarrier", "overlap_iallreduce"])]
COLLECTIVES = ["barrier", "bcast", "reduce", "allreduce", "gather", "scatter", "allgather",
               "alltoall", "alltoallv", "reduce_scatter"]
GROUPS = {
    "p2p": ["pingpong", "bw", "bibw"],
    "mbw_mr": ["mbw_mr"],
    "coll": COLLECTIVES,
    "topo": ["star", "ring", "chaos"],
    "overlap": analysis.OVERLAP_BENCHES,
    "spawn": ["spawn_latency", "spawn_rate", "spawn_pingpong"],
    "is": ["is"],
    "ddt": ["ddt_contig", "ddt_vector", "ddt_vector_vv", "ddt_struct"],
    "rma": [b for _, bs, _, _ in RMA_JOBS for b in bs],
    "oversub": ["oversub"],
    "limits": ["limits"],
}
ALL_BENCHES = [b for g in GROUPS.values() for b in g]


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


class Job:
    def __init__(self, name, benches, ranks, args, timeout, expect=None):
        self.name, self.benches, self.ranks, self.args, self.timeout = name, benches, ranks, args, timeout
        self.expect = expect if expect is not None else benches

    def __repr__(self):
        return "%s(n=%d)" % (self.name, self.ranks)


def sizes_arg(lst):
    return ["--sizes", ",".join(str(s) for s in lst)]


def make_jobs(selected, mode, ranks, tscale):
    """The list of MPI jobs for the selected benchmarks."""
    K, M = 1024, 1024 * 1024
    if mode == "smoke":
        p2p, coll, topo, ov, pp = [0, 8, 4 * K], [8, 4 * K], [8, 4 * K], [1 * K, 64 * K], [8, 4 * K]
        ddt = [128, 8 * K]
        rma = {"lat": [8], "bw": [4 * K], "acc": [8], "one": [8], "halo": [K]}
        flag, timeout = ["--smoke"], 30
    elif mode == "quick":
        p2p, coll, topo, ov, pp = [8, K, 64 * K, M, 4 * M], [8, K, 64 * K, M], [K, 64 * K, M], \
            [K, 64 * K, M, 4 * M], [8, K, 64 * K]
        ddt = [512, 8 * K, 64 * K, 4 * M]
        rma = {"lat": [8], "bw": [M], "acc": [8], "one": [8], "halo": [K, 64 * K]}
        flag, timeout = ["--quick"], 25
    else:
        p2p = [0] + [2 ** i for i in range(23)]
        coll = [4 ** i for i in range(1, 11)]
        topo = [4 ** i for i in range(0, 11)]
        ov = [16 * 4 ** i for i in range(10)]
        pp = [2 ** i for i in range(0, 21, 2)]
        # the matrix column takes payloads up to 8 KiB (N <= 1024), the
        # structs from 1 KiB, the contiguous reference all of them
        ddt = [128, 512] + [2 ** i for i in range(10, 23)]
        sweep = [1, 8] + [4 ** i for i in range(2, 12)]  # 1 B to 4 MiB, with 8 B and 1 MiB
        rma = {"lat": sweep, "bw": sweep, "acc": [8, 64, K, 64 * K], "one": [8],
               "halo": [64 * 4 ** i for i in range(8)]}
        flag, timeout = ["--budget", "0.3"], 300
    t = lambda s: max(5, int(s * tscale))
    jobs = []
    sel = lambda names: [b for b in names if b in selected]
    b = sel(GROUPS["p2p"])
    if b:
        jobs.append(Job("p2p", b, 2, [",".join(b)] + flag + sizes_arg(p2p), t(timeout)))
    if "mbw_mr" in selected:
        jobs.append(Job("mbw_mr", ["mbw_mr"], max(2, ranks - ranks % 2), ["mbw_mr"] + flag + sizes_arg(p2p),
                        t(timeout)))
    b = sel(COLLECTIVES)
    if b:
        jobs.append(Job("coll", b, ranks, [",".join(b)] + flag + sizes_arg(coll), t(timeout)))
    b = sel(GROUPS["topo"])
    if b:
        jobs.append(Job("topo", b, max(ranks, 2), [",".join(b)] + flag + sizes_arg(topo), t(timeout)))
    for name, names in OVERLAP_JOBS:
        b = sel(names)
        if b:
            # 2 ranks: the pair of the point-to-point forms, and the
            # collectives' default (they take any number)
            jobs.append(Job(name, b, 2, [",".join(b)] + flag + sizes_arg(ov), t(timeout)))
    st = t(15 if mode != "full" else 90)
    parents = [1, 2] if mode == "full" else [2]
    for s in sel(GROUPS["spawn"]):
        for n in (parents if s == "spawn_latency" else [2]):
            args = [s] + flag + (sizes_arg(pp) if s == "spawn_pingpong" else [])
            expect = ["spawn_pp_inter", "spawn_pp_intra"] if s == "spawn_pingpong" else [s]
            jobs.append(Job(s, [s], n, args, st, expect))
    if "is" in selected:
        jobs.append(Job("is", ["is"], ranks, ["is"] + flag, t(timeout)))
    b = sel(GROUPS["ddt"])
    if b:
        jobs.append(Job("ddt", b, 2, [",".join(b)] + flag + sizes_arg(ddt), t(timeout)))
    for name, names, wide, kind in RMA_JOBS:
        b = sel(names)
        if b:
            # up to ten benchmarks a job; an MPI whose passive target waits
            # for the target process to be scheduled takes milliseconds an
            # operation on a loaded machine
            jobs.append(Job(name, b, max(ranks, 2) if wide else 2,
                            [",".join(b)] + flag + sizes_arg(rma[kind]), t(timeout * max(1, len(b) // 4))))
    if "oversub" in selected:
        small = [8] if mode != "full" else [8, 1024]
        for n in (4, 8):
            jobs.append(Job("oversub", ["pingpong", "allreduce", "token"], n,
                            ["pingpong,allreduce,token"] + flag + sizes_arg(small), t(60 if mode != "full" else 300)))
    return jobs


def choose_mpis(spec, found, warn=log):
    """The MPIs of an --mpi list (see mpis.parse_variant): each a found
    MPI, or a found MPI with environment settings under its own label.
    Unknown names are left out with a message; a malformed entry or a label
    given twice raises ValueError."""
    chosen = []
    for entry in spec.split(","):
        if not entry.strip():
            continue
        label, name, env = mpis.parse_variant(entry)
        if name not in found:
            warn("MPI %r not found (known here: %s)" % (name, ",".join(found) or "none"))
            continue
        if any(m.name == label for m in chosen):
            raise ValueError("--mpi: %r given twice" % label)
        chosen.append(mpis.variant(found[name], label, env))
    return chosen


def file_label(name):
    """An MPI's label as a part of a file name (variants carry '[', '=', ':')."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")


def run_cmd(cmd, timeout, env=None):
    """Run with a time-out, killing the whole process group on expiry.
    Returns (rc, timed_out, stdout, stderr, seconds)."""
    t0 = time.time()
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             start_new_session=True)
    except OSError as e:
        return 127, False, "", str(e), 0.0
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, False, out, err, time.time() - t0
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            try:
                out, err = p.communicate(timeout=3)
                break
            except subprocess.TimeoutExpired:
                out, err = "", ""
        else:
            out, err = "", ""
        return -9, True, out or "", err or "", time.time() - t0


def machine_info():
    info = {"host": platform.node(), "kernel": platform.release(), "python": platform.python_version(),
            "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["mem_gib"] = round(int(f.readline().split()[1]) / 1024 / 1024, 1)
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    info["os"] = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return info


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="bench/run", description=__doc__)
    ap.add_argument("--mpi", help="comma list of MPIs to run (default: all found: baton,mpich,openmpi); an "
                                  "entry NAME:VAR=VAL[:VAR2=VAL2] runs MPI NAME with those environment settings as "
                                  "an MPI of its own, labelled NAME[VAR=VAL...] or LABEL if written "
                                  "LABEL=NAME:VAR=VAL, e.g. baton,baton:BATON_PROGRESS=thread,mpich,"
                                  "mpich:MPIR_CVAR_ASYNC_PROGRESS=1 (BENCH_THREAD_MULTIPLE=1 makes mpibench "
                                  "ask for MPI_THREAD_MULTIPLE)")
    ap.add_argument("--add-mpi", action="append", default=[], metavar="NAME:MPICC:MPIEXEC[:FLAGS]",
                    help="another MPI, e.g. 'mine:/opt/x/bin/mpicc:/opt/x/bin/mpiexec:-bind-to none'")
    ap.add_argument("--bench", help="comma list of benchmarks or groups (%s); default all" %
                    ",".join(list(GROUPS) + ALL_BENCHES))
    ap.add_argument("--quick", action="store_true", help="few sizes and iterations (< 2 min)")
    ap.add_argument("--smoke", action="store_true", help="seconds: tiny sizes, checks the data paths")
    ap.add_argument("--rounds", type=int, help="interleaved rounds (default 3, quick 2, smoke 1)")
    ap.add_argument("--ranks", type=int, default=max(2, os.cpu_count() or 2),
                    help="ranks for collectives, topologies, IS, multi-pair (default: cores)")
    ap.add_argument("--timeout-scale", type=float, default=1.0, help="multiply every time-out")
    ap.add_argument("--max-time", type=float,
                    help="overall time budget in seconds; jobs not started by then are skipped "
                         "(default: quick 105, smoke 60, full none)")
    ap.add_argument("--retry-failed", action="store_true",
                    help="run a job again in later rounds even after it failed for an MPI")
    ap.add_argument("--out", help="result directory (default bench/results/<timestamp>)")
    ap.add_argument("--install-others", action="store_true",
                    help="apt-get install -y mpich openmpi-bin libopenmpi-dev python3-matplotlib first")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--rerender", metavar="DIR",
                    help="write the report and plots of an earlier run again from DIR's raw.jsonl, runs.json "
                         "and meta.json (after a change to the analysis), then exit")
    ap.add_argument("--list", action="store_true", help="list MPIs found and benchmarks, then exit")
    ap.add_argument("--transport", choices=["default", "tcp"], default="default",
                    help="tcp: every MPI forced onto TCP (Baton BATON_TRANSPORTS=tcp, MPICH UCX_TLS=tcp, "
                         "Open MPI ob1 + btl tcp,self) and the raw TCP reference 'rawtcp' added; ratios "
                         "are then against rawtcp (see docs/PERFORMANCE.md, TCP point-to-point)")
    ap.add_argument("--hosts", help="comma list of hosts for the ranks (round-robin; rawtcp: client on the "
                                    "first, server on the second), e.g. bh1,bh2 from scripts/netns.sh")
    ap.add_argument("--rsh", help="ssh-compatible remote-start command for --hosts, e.g. scripts/netns-rsh")
    ap.add_argument("--tcp-if", help="network interface for the MPIs' TCP traffic (default: lo on one host, "
                                     "eth0 on the namespace hosts of scripts/netns.sh, else the MPI's choice)")
    ap.add_argument("--localhost", help="this machine's name as the hosts see it (MPICH hydra's -localhost; "
                                        "default bh0 with the namespace hosts bhK)")
    return ap.parse_args(argv)


def rerender(out, plots=True):
    try:
        with open(os.path.join(out, "meta.json")) as f:
            meta = json.load(f)
        with open(os.path.join(out, "runs.json")) as f:
            runs = json.load(f)
        with open(os.path.join(out, "raw.jsonl")) as f:
            records = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        log("--rerender %s: %s" % (out, e))
        return 2
    report.write_all(out, meta, records, runs, plots=plots, log=log)
    log("report: %s" % os.path.join(out, "report.md"))
    return 0


def main(argv=None):
    a = parse_args(argv if argv is not None else sys.argv[1:])
    mode = "smoke" if a.smoke else "quick" if a.quick else "full"
    rounds = a.rounds or {"smoke": 1, "quick": 2, "full": 3}[mode]
    if a.rerender:
        return rerender(a.rerender, plots=not a.no_plots)
    if a.install_others:
        log("apt-get install -y mpich openmpi-bin libopenmpi-dev python3-matplotlib")
        rc = subprocess.call(["apt-get", "install", "-y", "mpich", "openmpi-bin", "libopenmpi-dev",
                              "python3-matplotlib"])
        if rc:
            log("apt-get failed (%d); going on with what is installed" % rc)

    found = mpis.known_mpis()
    for spec in a.add_mpi:
        m = mpis.parse_mpi_spec(spec)
        found[m.name] = m
    hosts = [h.strip() for h in a.hosts.split(",") if h.strip()] if a.hosts else []
    tcp_if, localhost = a.tcp_if, a.localhost
    ns_hosts = [re.fullmatch(r"(.*[^0-9])[0-9]+", h) for h in hosts]
    if hosts and all(m and os.path.exists("/run/netns/" + h) for m, h in zip(ns_hosts, hosts)):
        # the test hosts of scripts/netns.sh (PREFIX + K): veth eth0, root
        # namespace named PREFIX + 0
        tcp_if = tcp_if or "eth0"
        localhost = localhost or ns_hosts[0].group(1) + "0"
    if hosts and not a.rsh:
        log("--hosts needs --rsh (an ssh-compatible remote-start command, e.g. scripts/netns-rsh)")
        return 2
    if a.rsh and not shutil.which(a.rsh):
        log("--rsh %s: not an executable" % a.rsh)
        return 2
    if a.transport != "default" or hosts:
        found = mpis.apply_transport(found, a.transport, hosts, a.rsh, tcp_if, localhost)
    if a.mpi:
        try:
            chosen = choose_mpis(a.mpi, found)
        except ValueError as e:
            log(str(e))
            return 2
        if not chosen:
            return 2
    else:
        chosen = list(found.values())
    selected = []
    for b in (a.bench.split(",") if a.bench else list(GROUPS)):
        b = b.strip()
        if b in GROUPS:
            selected += GROUPS[b]
        elif b in ALL_BENCHES:
            selected.append(b)
        else:
            log("unknown benchmark %r; known: %s" % (b, ",".join(list(GROUPS) + ALL_BENCHES)))
            return 2
    if a.list:
        for m in chosen:
            env = " ".join("%s=%s" % kv for kv in sorted(m.env.items()) if not kv[0].startswith("OMPI_ALLOW"))
            log("%-8s %s %s %s %s" % (m.name, env, m.mpicc, m.mpiexec, " ".join(m.flags)))
        log("benchmarks: " + ",".join(selected))
        return 0
    if not chosen:
        log("no MPI found: install MPICH/Open MPI (--install-others) or give --add-mpi")
        return 2

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = a.out or os.path.join(mpis.BENCH_DIR, "results", stamp)
    os.makedirs(out, exist_ok=True)
    t_start = time.time()
    log("results in %s (mode %s, %d round(s), MPIs %s)" % (out, mode, rounds, ",".join(m.name for m in chosen)))

    limits_bin = mpis.build_native(log)
    for m in chosen:
        if mpis.build(m, log):
            m.version = mpis.query_version(m)
            log("%s: %s" % (m.name, m.version[:100]))
        else:
            log("%s: %s" % (m.name, m.build_error))

    jobs = make_jobs(selected, mode, a.ranks, a.timeout_scale)
    runs, records = [], []
    flag = {"smoke": ["--smoke"], "quick": ["--quick"], "full": []}[mode]

    if "limits" in selected and limits_bin:
        log("machine limits ...")
        rc, to, so, se, dt = run_cmd([limits_bin, "all"] + flag, 300)
        st, why, recs = analysis.classify_run(rc, to, 300, so, se)
        for r in recs:
            r.update(mpi="machine", round=0)
        records += recs
        runs.append({"mpi": "machine", "job": "limits", "ranks": 1, "round": 0, "status": st, "reason": why,
                     "seconds": round(dt, 2), "benches": ["limits"]})

    max_time = a.max_time if a.max_time is not None else {"smoke": 60, "quick": 105, "full": 0}[mode]
    cal = {}
    failed_before = {}
    total_steps = rounds * sum(1 for j in jobs for m in chosen if m.adapt(j.benches, j.args) is not None)
    step = 0
    for rnd in range(1, rounds + 1):
        if limits_bin:
            rc, to, so, se, dt = run_cmd([limits_bin, "cacheline", "--smoke"], 30)
            recs, _ = analysis.parse_output(so)
            cal[rnd] = recs[0]["median_us"] if recs else None
            log("[round %d/%d] calibration: cache-line one-way %s us" %
                (rnd, rounds, "%.4f" % cal[rnd] if cal[rnd] else "n/a"))
        order = chosen[(rnd - 1) % len(chosen):] + chosen[:(rnd - 1) % len(chosen)]
        for job in jobs:
            for m in order:
                adapted = m.adapt(job.benches, job.args)
                if adapted is None:
                    continue  # nothing of this job exists for it (rawtcp: only pingpong and bw)
                benches, args = adapted
                expect = job.expect if benches == job.benches else benches
                step += 1
                tag = "[round %d/%d %d/%d] %-8s %-15s n=%d" % (rnd, rounds, step, total_steps, m.name, job.name,
                                                             job.ranks)
                base = {"mpi": m.name, "job": job.name, "ranks": job.ranks, "round": rnd,
                        "benches": benches, "command": " ".join(m.launch(job.ranks, args))}
                if m.build_error:
                    runs.append(dict(base, status="failed", reason=m.build_error, seconds=0))
                    log(tag + " FAILED: " + m.build_error)
                    continue
                if max_time and time.time() - t_start > max_time:
                    runs.append(dict(base, status="skipped",
                                     reason="overall time budget (--max-time %gs) spent" % max_time, seconds=0))
                    log(tag + " skipped (time budget spent)")
                    continue
                key = (m.name, job.name, job.ranks)
                if key in failed_before and not a.retry_failed:
                    runs.append(dict(base, status="skipped",
                                     reason="failed in round %d: %s" % failed_before[key], seconds=0))
                    log(tag + " skipped (failed before)")
                    continue
                rc, to, so, se, dt = run_cmd(m.launch(job.ranks, args), job.timeout, m.run_env())
                st, why, recs = analysis.classify_run(rc, to, job.timeout, so, se, expect)
                for r in recs:
                    r.update(mpi=m.name, round=rnd)
                records += recs
                runs.append(dict(base, status=st, reason=why, seconds=round(dt, 2), results=len(recs)))
                if st != "ok":
                    failed_before[key] = (rnd, why)
                    log(tag + " FAILED (%.1fs): %s" % (dt, why))
                    err_file = "stderr-%s-%s-n%d-r%d.txt" % (file_label(m.name), job.name, job.ranks, rnd)
                    with open(os.path.join(out, err_file), "w") as f:
                        f.write(se[-20000:])
                else:
                    log(tag + " ok %.1fs (%d results)" % (dt, len(recs)))

    meta = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "mode": mode, "rounds": rounds,
            "ranks": a.ranks, "machine": machine_info(), "calibration_us": cal,
            "mpis": [{"name": m.name, "base": m.base or m.name, "mpicc": m.mpicc, "mpiexec": m.mpiexec,
                      "flags": m.flags,
                      "env": {k: v for k, v in m.env.items() if not k.startswith("OMPI_ALLOW")},
                      "version": m.version, "build_error": m.build_error} for m in chosen],
            "transport": a.transport, "hosts": hosts, "rsh": a.rsh,
            "reference": "rawtcp" if any(m.name == "rawtcp" for m in chosen) else None,
            "seconds": round(time.time() - t_start, 1), "benches": selected}
    report.write_all(out, meta, records, runs, plots=not a.no_plots, log=log)
    bad = [r for r in runs if r["status"] != "ok"]
    log("done in %.0fs: %d runs, %d failed/skipped; report: %s" %
        (time.time() - t_start, len(runs), len(bad), os.path.join(out, "report.md")))
    return 0
