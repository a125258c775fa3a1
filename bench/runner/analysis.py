"""Pure analysis helpers of the runner (unit-tested in bench/tests)."""
import json
import math
from collections import defaultdict


def median(values):
    v = sorted(x for x in values if x is not None and not (isinstance(x, float) and math.isnan(x)))
    if not v:
        return None
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def parse_output(text):
    """Split a benchmark's stdout into result records and error messages.

    Result records are JSON objects with a "bench" key and no "error" key;
    objects with an "error" key are errors.  Anything else (banners,
    warnings of the MPI library) is ignored."""
    records, errors = [], []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        if "error" in obj:
            errors.append(str(obj["error"]))
        elif "bench" in obj:
            records.append(obj)
    return records, errors


def classify_run(rc, timed_out, timeout_s, stdout, stderr, expected=None):
    """Decide whether a benchmark run succeeded.

    Returns (status, reason, records): status "ok" or "failed"; reason is a
    one-line human readable cause; records are the results parsed even from
    a failed run.  expected: bench names the run should have produced."""
    records, errors = parse_output(stdout)
    if timed_out:
        reason = "timed out after %gs" % timeout_s
        if errors:
            reason += " (" + errors[0] + ")"
        return "failed", _clip(reason), records
    if rc != 0:
        if rc < 0:
            reason = "killed by signal %d" % -rc
        else:
            reason = "exit code %d" % rc
        detail = errors[0] if errors else _last_meaningful(stderr)
        if detail:
            reason += ": " + detail
        return "failed", _clip(reason), records
    if errors:
        return "failed", _clip("reported error: " + errors[0]), records
    if not records:
        return "failed", _clip("no results" + (": " + _last_meaningful(stderr) if stderr else "")), records
    if expected:
        got = {r["bench"] for r in records}
        missing = [b for b in expected if b not in got]
        if missing:
            return "failed", "no results for " + ",".join(missing), records
    return "ok", "", records


def _last_meaningful(text):
    for line in reversed((text or "").splitlines()):
        line = line.strip()
        # MPICH frames its messages in lines starting "=", Open MPI in rules of "-"
        if line and not line.startswith("=") and line.strip("-") and "Abort(" not in line[:6]:
            return line
    return ""


def _clip(s, n=300):
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 3] + "..."


def calibration_factors(cal_by_round):
    """cal_by_round: {round: cache-line one-way latency in us (or None)}.
    Returns {round: factor}; factor > 1 means that round's machine was slower
    than the median round: calibrated time = raw time / factor."""
    ref = median([v for v in cal_by_round.values() if v])
    out = {}
    for r, v in cal_by_round.items():
        out[r] = (v / ref) if (v and ref) else 1.0
    return out


# The one-sided benchmarks (bench/src/rma*.c), in report order.
RMA_SYNCS = ("flush", "lock", "fence", "pscw", "create")
RMA_LAT = ["rma_%s_lat_%s" % (op, sy) for op in ("put", "get") for sy in RMA_SYNCS]
RMA_BW = ["rma_%s_bw_%s" % (op, sy) for op in ("put", "get") for sy in RMA_SYNCS]
RMA_ATOMIC = ["rma_acc_lat", "rma_fop_lat", "rma_cas_lat", "rma_fop_contended", "rma_cas_contended"]
RMA_BENCHES = RMA_LAT + RMA_BW + RMA_ATOMIC + ["rma_halo"]

KEY_FIELDS = ("mpi", "bench", "size", "ranks")
# A result whose median over rounds is more than this many times its best
# round is "noisy": in half the rounds or more something other than the MPI
# set its time (on a shared machine: the job's processes waited for a core
# that another program held, a scheduler time slice of milliseconds).
NOISY_SPREAD = 2.0


def is_noisy(row):
    return row.get("spread") is not None and row["spread"] > NOISY_SPREAD

NUMERIC_EXTRA = ("msg_rate", "rate_per_s", "mkeys_per_s", "total_mbps", "round_us", "window",
                 "channels", "pairs", "children", "ops_per_s", "success_share")


def aggregate(records, factors=None):
    """Combine the records of several rounds.

    records: dicts with mpi, round, bench, size, ranks, min_us, median_us,
    mbps (overlap records are handled by overlap_summary, not here).
    Returns a list of rows: min_us = min over rounds, median_us = median of
    the per-round medians, cal_median_us = median of the per-round medians
    divided by the round's calibration factor, mbps = median, rounds,
    best_round_us = the lowest per-round median, spread = median_us /
    best_round_us (see NOISY_SPREAD)."""
    factors = factors or {}
    groups = defaultdict(list)
    for r in records:
        if r.get("bench", "").startswith("overlap_"):
            continue
        groups[tuple(r.get(k) for k in KEY_FIELDS)].append(r)
    rows = []
    for key, rs in groups.items():
        row = dict(zip(KEY_FIELDS, key))
        row["min_us"] = min(r["min_us"] for r in rs)
        row["median_us"] = median([r["median_us"] for r in rs])
        row["cal_median_us"] = median([r["median_us"] / factors.get(r.get("round"), 1.0) for r in rs])
        row["mbps"] = median([r.get("mbps", 0.0) for r in rs])
        row["rounds"] = len(rs)
        row["best_round_us"] = min(r["median_us"] for r in rs)
        row["spread"] = row["median_us"] / row["best_round_us"] if row["best_round_us"] > 0 else None
        if "class" in rs[0]:
            row["class"] = rs[0]["class"]
        for f in NUMERIC_EXTRA:
            vals = [r[f] for r in rs if f in r]
            if vals:
                row[f] = median(vals)
        rows.append(row)
    rows.sort(key=lambda r: (r["bench"], r["ranks"], r["size"], r["mpi"]))
    return rows


def ratios_to_best_other(values):
    """values: {mpi: time (lower is better)}.  Returns {mpi: time / best
    time among the other MPIs} (None when there is no other MPI)."""
    out = {}
    for m, v in values.items():
        others = [x for k, x in values.items() if k != m and x is not None and x > 0]
        out[m] = (v / min(others)) if (others and v is not None) else None
    return out


DDT_REFERENCE = "ddt_contig"
DDT_NONCONTIG = ("ddt_vector", "ddt_vector_vv", "ddt_struct")


def ddt_ratios(rows):
    """Non-contiguous / contiguous time of the derived-datatype ping-pongs.

    rows: aggregated rows (see aggregate).  For every ddt_vector,
    ddt_vector_vv and ddt_struct row that has a ddt_contig row of the same
    MPI, payload size and ranks, returns {mpi, bench, size, ranks,
    median_us, contig_us, ratio} with ratio = median_us / contig_us
    (1 = as fast as the contiguous message; the project's goal for large
    messages is <= 1.5).  Sorted by bench, size, mpi."""
    ref = {(r["mpi"], r["size"], r["ranks"]): r["median_us"] for r in rows if r["bench"] == DDT_REFERENCE}
    out = []
    for r in rows:
        if r["bench"] not in DDT_NONCONTIG:
            continue
        c = ref.get((r["mpi"], r["size"], r["ranks"]))
        if not c or c <= 0 or r["median_us"] is None:
            continue
        out.append({"mpi": r["mpi"], "bench": r["bench"], "size": r["size"], "ranks": r["ranks"],
                    "median_us": r["median_us"], "contig_us": c, "ratio": r["median_us"] / c})
    out.sort(key=lambda x: (DDT_NONCONTIG.index(x["bench"]), x["size"], x["mpi"]))
    return out


def saturation(points, rel_tol=0.10, abs_tol_us=0.5):
    """Computation time beyond which the total time of an overlap
    iteration starts to grow.

    points: (compute_us, total_us) pairs, one with compute_us == 0 (the
    pure communication time T0).  The threshold is T0*(1+rel_tol)+abs_tol;
    s is where the total time first crosses it (linear interpolation
    between the last point below and the first point above).  If no point
    crosses, s is the largest compute time measured (a lower bound)."""
    pts = sorted((float(c), float(t)) for c, t in points)
    if not pts:
        return None
    t0 = pts[0][1] if pts[0][0] == 0 else min(t for _, t in pts)
    thresh = t0 * (1 + rel_tol) + abs_tol_us
    prev = None
    for c, t in pts:
        if t > thresh:
            if prev is None:
                return 0.0
            c1, t1 = prev
            if t == t1:
                return c1
            return max(0.0, c1 + (thresh - t1) * (c - c1) / (t - t1))
        prev = (c, t)
    return pts[-1][0]


def efficiency(points):
    """Share of the communication time hidden behind computation.

    T0 = total time without computation (pure communication).  At the
    smallest computation time c >= T0 (or the largest measured, if none is
    that long), with total time T: hidden = T0 + c - T, efficiency =
    hidden / min(T0, c), clamped to [0, 1].  1 means the message costs
    nothing on top of the computation; 0 means no overlap at all."""
    pts = sorted((float(c), float(t)) for c, t in points)
    base = [t for c, t in pts if c == 0]
    work = [(c, t) for c, t in pts if c > 0]
    if not base or not work:
        return None
    t0 = base[0]
    if t0 <= 0:
        return None
    long_enough = [p for p in work if p[0] >= t0]
    c, t = long_enough[0] if long_enough else work[-1]
    hidden = t0 + c - t
    e = hidden / min(t0, c)
    return max(0.0, min(1.0, e))


# The overlap benchmarks (bench/src/overlap.c), in report order, with what
# computes while the communication is in flight.
OVERLAP_FORMS = (
    ("overlap_fixed", "both ranks compute (FIXED) between Isend/Irecv and Wait"),
    ("overlap_daxpy", "both ranks compute (DAXPY over message-sized vectors) between Isend/Irecv and Wait"),
    ("overlap_sender", "the sender computes (FIXED) between Isend and Wait; the receiver waits in MPI_Wait"),
    ("overlap_receiver", "the receiver, its Irecv posted first, computes (FIXED) before its Wait; the sender "
                         "waits in MPI_Wait"),
    ("overlap_ibarrier", "every rank computes (FIXED) between MPI_Ibarrier and MPI_Wait"),
    ("overlap_iallreduce", "every rank computes (FIXED) between MPI_Iallreduce (sum of size / 8 doubles) and "
                           "MPI_Wait"),
)
OVERLAP_BENCHES = [b for b, _ in OVERLAP_FORMS]
OVERLAP_TITLES = dict(OVERLAP_FORMS)


def overlap_order(benches):
    """The overlap benchmarks among benches: the known ones in report
    order, then any other in name order."""
    present = set(benches)
    return [b for b in OVERLAP_BENCHES if b in present] + sorted(present - set(OVERLAP_BENCHES))


def overlap_disturbed(rs, t0_best=None, rel=NOISY_SPREAD, abs_us=1.0):
    """Whether something other than the MPI set the times of one round of
    an overlap benchmark (rs: that round's records of one MPI, benchmark
    and size; t0_best: the lowest T0 of every round, None for this
    round's): a computation alone took more than rel times the time asked
    for (the work is calibrated to it: on a quiet machine the two agree
    within a few per cent), T0 is more than rel times t0_best, or a total
    is more than rel times T0 + computation, the time without any overlap
    (each plus abs_us).  A scheduler time slice given to another program
    costs milliseconds against microseconds, and a result computed from
    such a round says nothing about the MPI."""
    t0 = [r["median_us"] for r in rs if not r.get("compute_us")]
    best = t0_best if t0_best is not None else (min(t0) if t0 else None)
    for r in rs:
        c = r.get("compute_us") or 0.0
        if r.get("nominal_us") and c > rel * r["nominal_us"] + abs_us:
            return True
        if best is not None and r["median_us"] > rel * (best + c) + abs_us:
            return True
    return False


def overlap_summary(records, factors=None):
    """Saturation and efficiency per (mpi, bench, size), from the overlap
    records of every round (each round analysed on its own, then the
    median over rounds).  Disturbed rounds (overlap_disturbed) count only
    when no round is quiet; disturbed: how many rounds were, noisy: all
    of them were."""
    per = defaultdict(list)
    for r in records:
        if r.get("bench", "").startswith("overlap_"):
            per[(r["mpi"], r["bench"], r["size"], r.get("round", 0))].append(r)
    best_t0 = {}
    for (mpi, bench, size, rnd), rs in per.items():
        for r in rs:
            if not r.get("compute_us"):
                k = (mpi, bench, size)
                best_t0[k] = min(best_t0.get(k, r["median_us"]), r["median_us"])
    acc = defaultdict(lambda: {"quiet": [], "disturbed": []})
    for (mpi, bench, size, rnd), rs in per.items():
        pts = [(r.get("compute_us", 0.0), r["median_us"]) for r in rs]
        t0 = [t for c, t in pts if c == 0]
        res = (saturation(pts), efficiency(pts), t0[0] if t0 else None)
        bad = overlap_disturbed(rs, best_t0.get((mpi, bench, size)))
        acc[(mpi, bench, size)]["disturbed" if bad else "quiet"].append(res)
    rows = []
    for (mpi, bench, size), a in sorted(acc.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
        use = a["quiet"] or a["disturbed"]
        rows.append({"mpi": mpi, "bench": bench, "size": size, "comm_us": median([u[2] for u in use]),
                     "saturation_us": median([u[0] for u in use]), "efficiency": median([u[1] for u in use]),
                     "rounds": len(use), "disturbed": len(a["disturbed"]), "noisy": not a["quiet"]})
    return rows


# Areas of the per-area comparison (report section "By area" and the
# area_*.png plots). A row belongs to the first area whose test accepts it;
# cpus: the machine's core count, so that runs with more ranks than cores
# count as oversubscribed.
AREAS = (
    ("oversub", "oversubscribed (more ranks than cores)",
     lambda b, n, cpus: b == "token" or (b == "pingpong" and n > max(cpus, 2))),
    ("p2p", "point-to-point", lambda b, n, cpus: b in ("pingpong", "bw", "bibw", "mbw_mr")),
    ("coll", "collectives", lambda b, n, cpus: b in ("barrier", "bcast", "reduce", "allreduce", "gather",
                                                     "scatter", "allgather", "alltoall", "alltoallv",
                                                     "reduce_scatter")),
    ("topo", "logical topologies", lambda b, n, cpus: b in ("star", "ring", "chaos")),
    ("ddt", "derived datatypes", lambda b, n, cpus: b.startswith("ddt_")),
    ("rma", "one-sided communication", lambda b, n, cpus: b.startswith("rma_")),
    ("spawn", "dynamic processes", lambda b, n, cpus: b.startswith("spawn_")),
    ("is", "application kernel (NAS IS)", lambda b, n, cpus: b == "is"),
)
AREA_TITLES = {k: t for k, t, _ in AREAS}


def area_of(bench, ranks, cpus):
    """The area key of a result row (None: not compared by area, e.g. the
    machine probes and the overlap records)."""
    for key, _, test in AREAS:
        if test(bench, ranks or 0, cpus or 0):
            return key
    return None


def relative_rows(rows, ref, cpus):
    """Time of ref against every other MPI, row by row.

    rows: aggregated rows (see aggregate; median_us: lower is better for
    every benchmark, spawn_rate's being the time per spawn).  Returns one
    entry per (bench, ranks, size) that ref has: {area, bench, ranks, size,
    ref_us, times: {mpi: us}, rel: {mpi: ref time / mpi's time}} for every
    other MPI with a result (below 1: ref faster), and best: ref time /
    best time among the others (None if no other MPI has the row).  Sorted
    by area (in AREAS order), bench, ranks, size."""
    by_key = defaultdict(dict)
    best_round = defaultdict(dict)
    noisy = defaultdict(list)
    for r in rows:
        if r["mpi"] == "machine" or r.get("median_us") is None:
            continue
        key = (r["bench"], r["ranks"], r["size"])
        by_key[key][r["mpi"]] = r["median_us"]
        best_round[key][r["mpi"]] = r.get("best_round_us") or r["median_us"]
        if is_noisy(r):
            noisy[key].append(r["mpi"])
    order = [k for k, _, _ in AREAS]
    out = []
    for (bench, ranks, size), times in by_key.items():
        area = area_of(bench, ranks, cpus)
        t = times.get(ref)
        if area is None or not t or t <= 0:
            continue
        others = {m: v for m, v in times.items() if m != ref and v and v > 0}
        br = best_round[(bench, ranks, size)]
        br_others = [v for m, v in br.items() if m in others]
        out.append({"area": area, "bench": bench, "ranks": ranks, "size": size, "ref_us": t, "times": times,
                    "rel": {m: t / v for m, v in others.items()},
                    "best": (t / min(others.values())) if others else None,
                    "best_rounds": (br[ref] / min(br_others)) if br_others and br.get(ref) else None,
                    "noisy": sorted(m for m in noisy[(bench, ranks, size)] if m == ref or m in others)})
    out.sort(key=lambda e: (order.index(e["area"]), e["bench"], e["ranks"], e["size"]))
    return out


def geomean(values):
    v = [x for x in values if x is not None and x > 0]
    if not v:
        return None
    return math.exp(sum(math.log(x) for x in v) / len(v))


def area_summary(rel):
    """Per area, from relative_rows, over the rows with another MPI to
    compare: rows; noisy, the rows where some MPI's result is noisy;
    geomean, low, high: geometric mean, lowest and highest of ref / best
    other (medians over rounds); quiet_geomean: the geometric mean over the
    rows that are not noisy (None if none); best_rounds_geomean: from the
    lowest per-round medians; ahead: rows with ref below 1 (faster than
    every other MPI).  A list in AREAS order."""
    acc = defaultdict(list)
    for e in rel:
        if e["best"] is not None:
            acc[e["area"]].append(e)
    out = []
    for key, _, _ in AREAS:
        es = acc.get(key)
        if not es:
            continue
        v = [e["best"] for e in es]
        out.append({"area": key, "rows": len(v), "noisy": sum(1 for e in es if e["noisy"]),
                    "geomean": geomean(v), "low": min(v), "high": max(v),
                    "quiet_geomean": geomean([e["best"] for e in es if not e["noisy"]]),
                    "best_rounds_geomean": geomean([e["best_rounds"] for e in es]),
                    "ahead": sum(1 for x in v if x < 1)})
    return out
