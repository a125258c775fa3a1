"""Raw results, CSV, plots and the Markdown report of one run."""
import csv
import json
import os
from collections import defaultdict

from . import analysis

LAT_BENCHES = ["pingpong", "token", "barrier", "bcast", "reduce", "allreduce", "gather", "scatter",
               "allgather", "alltoall", "alltoallv", "reduce_scatter", "spawn_pp_inter", "spawn_pp_intra"]
BW_BENCHES = ["pingpong", "bw", "bibw", "mbw_mr", "star", "ring", "chaos", "ddt_contig", "ddt_vector",
              "ddt_vector_vv", "ddt_struct"] + analysis.RMA_BW + ["rma_halo"]
ORDER = ["pingpong", "bw", "bibw", "mbw_mr", "token", "barrier", "bcast", "reduce", "allreduce", "gather",
         "scatter", "allgather", "alltoall", "alltoallv", "reduce_scatter", "star", "ring", "chaos",
         "spawn_latency", "spawn_rate", "spawn_pp_inter", "spawn_pp_intra", "is", "ddt_contig", "ddt_vector",
         "ddt_vector_vv", "ddt_struct"] + analysis.RMA_BENCHES


def fmt_size(n):
    n = int(n)
    for unit, v in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= v and n % v == 0:
            return "%d %s" % (n // v, unit)
    return "%d B" % n


def fmt(x, digits=3):
    if x is None:
        return "–"
    if abs(x) >= 1000:
        return "%.0f" % x
    if abs(x) >= 100:
        return "%.1f" % x
    return ("%%.%dg" % digits) % x


def write_all(out, meta, records, runs, plots=True, log=print):
    mpi_names = [m["name"] for m in meta["mpis"]]
    cal = {int(k): v for k, v in meta.get("calibration_us", {}).items()}
    factors = analysis.calibration_factors(cal) if cal else {}
    meta["calibration_factors"] = factors
    with open(os.path.join(out, "raw.jsonl"), "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    with open(os.path.join(out, "runs.json"), "w") as f:
        json.dump(runs, f, indent=1)
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    rows = analysis.aggregate(records, factors)
    ov = analysis.overlap_summary(records, factors)
    fields = ["mpi", "bench", "size", "ranks", "min_us", "median_us", "cal_median_us", "best_round_us", "spread",
              "mbps", "rounds"] + \
        list(analysis.NUMERIC_EXTRA) + ["class"]
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)
    with open(os.path.join(out, "overlap.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["mpi", "bench", "size", "comm_us", "saturation_us", "efficiency",
                                          "rounds", "disturbed", "noisy"])
        w.writeheader()
        for r in ov:
            w.writerow(r)
    ref = area_reference(mpi_names)
    cpus = meta.get("machine", {}).get("cpus") or 0
    rel = analysis.relative_rows(rows, ref, cpus) if ref else []
    pngs = []
    if plots:
        try:
            pngs = make_plots(out, rows, ov, mpi_names)
            transport = meta.get("transport", "default")
            pngs += area_plots(out, rel, mpi_names, ref,
                               "" if transport == "default" and not meta.get("hosts") else
                               "%s%s: " % (transport, " across hosts" if meta.get("hosts") else ""))
        except ImportError as e:
            log("plots skipped: %s" % e)
            meta["plots_skipped"] = str(e)
    md = markdown(meta, rows, ov, runs, mpi_names, pngs, rel, ref)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(md)
    return md


def _series(rows, bench):
    s = defaultdict(list)
    for r in rows:
        if r["bench"] == bench and r["mpi"] != "machine":
            s[(r["mpi"], r["ranks"])].append(r)
    return s


def save_png(fig, path, dpi=90):
    """Save a figure as a PNG of at most 256 colours (a few tens of KiB, small
    enough to commit beside a document); a full-colour PNG without Pillow."""
    import io
    try:
        from PIL import Image
    except ImportError:
        fig.savefig(path, dpi=dpi)
        return
    buf = io.BytesIO()
    fig.savefig(buf, dpi=dpi, format="png")
    buf.seek(0)
    with Image.open(buf) as im:
        im.convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


def make_plots(out, rows, ov, mpi_names):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pngs = []
    benches = [b for b in ORDER if any(r["bench"] == b for r in rows)]
    for b in benches:
        s = _series(rows, b)
        if not s or max(len(v) for v in s.values()) < 2:
            continue
        want_bw = b in BW_BENCHES
        fig, axes = plt.subplots(1, 2 if want_bw else 1, figsize=(11 if want_bw else 6, 4.2))
        axes = list(axes) if want_bw else [axes]
        rank_counts = sorted({k[1] for k in s})
        for (mpi, ranks), pts in sorted(s.items()):
            pts = sorted(pts, key=lambda r: r["size"])
            pts = [p for p in pts if p["size"] > 0]
            if not pts:
                continue
            label = mpi if len(rank_counts) == 1 else "%s n=%d" % (mpi, ranks)
            # colour: the MPI, the same in every plot; line and marker: the rank count
            i = rank_counts.index(ranks)
            style = {"color": "C%d" % (mpi_names.index(mpi) % 10 if mpi in mpi_names else 9),
                     "linestyle": ("-", "--", ":", "-.")[i % 4], "marker": "osv^D"[i % 5], "label": label}
            axes[0].plot([p["size"] for p in pts], [p["median_us"] for p in pts], **style)
            if want_bw:
                axes[1].plot([p["size"] for p in pts], [p["mbps"] for p in pts], **style)
        axes[0].set_ylabel("time per operation (us, median)")
        axes[0].set_title("%s: latency" % b)
        if want_bw:
            axes[1].set_ylabel("MB/s" + (" per channel" if b in ("star", "ring", "chaos") else ""))
            axes[1].set_title("%s: bandwidth" % b)
        for ax in axes:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel({"is": "keys", "spawn_latency": "children"}.get(b, "message size (bytes)"))
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
        fig.tight_layout()
        name = "%s.png" % b
        save_png(fig, os.path.join(out, name))
        plt.close(fig)
        pngs.append(name)
    dr = analysis.ddt_ratios(rows)
    if dr:
        fig, ax = plt.subplots(figsize=(7, 4.2))
        style = {"ddt_vector": ("--", "o"), "ddt_vector_vv": (":", "s"), "ddt_struct": ("-", "^")}
        for i, mpi in enumerate(mpi_names):  # colour: MPI; line and marker: benchmark
            for b in analysis.DDT_NONCONTIG:
                p = sorted((r for r in dr if r["bench"] == b and r["mpi"] == mpi), key=lambda r: r["size"])
                if p:
                    ax.plot([r["size"] for r in p], [r["ratio"] for r in p], color="C%d" % (i % 10),
                            linestyle=style[b][0], marker=style[b][1], label="%s %s" % (mpi, b[4:]))
        ax.axhline(1.5, color="grey", linewidth=1, label="goal 1.5")
        ax.axhline(1.0, color="black", linewidth=0.5)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("payload (bytes)")
        ax.set_ylabel("time / contiguous time")
        ax.set_title("derived datatypes: non-contiguous / contiguous")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        save_png(fig, os.path.join(out, "ddt_ratio.png"))
        plt.close(fig)
        pngs.append("ddt_ratio.png")
    for kind in analysis.overlap_order(r["bench"] for r in ov):
        # a log-scale size axis has no place for size 0 (overlap_ibarrier):
        # such a benchmark has its table only
        pts = [r for r in ov if r["bench"] == kind and r["size"] > 0]
        if not pts:
            continue
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        for mpi in mpi_names:
            p = sorted((r for r in pts if r["mpi"] == mpi), key=lambda r: r["size"])
            if not p:
                continue
            c = "C%d" % (mpi_names.index(mpi) % 10)
            axes[0].plot([r["size"] for r in p], [r["efficiency"] or 0 for r in p], marker="o", color=c, label=mpi)
            axes[1].plot([r["size"] for r in p], [max(r["saturation_us"] or 0, 1e-3) for r in p], marker="o",
                         color=c, label=mpi + " saturation s")
            axes[1].plot([r["size"] for r in p], [r["comm_us"] or 1e-3 for r in p], linestyle="--", color=c,
                         label=mpi + " comm time T0")
        axes[0].set_title("%s: efficiency (share of message time hidden)" % kind)
        axes[0].set_ylim(-0.05, 1.05)
        axes[1].set_title("%s: saturation point" % kind)
        axes[1].set_yscale("log")
        axes[1].set_ylabel("us")
        for ax in axes:
            ax.set_xscale("log", base=2)
            ax.set_xlabel("message size (bytes)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        save_png(fig, os.path.join(out, kind + ".png"))
        plt.close(fig)
        pngs.append(kind + ".png")
    return pngs


def area_reference(mpi_names):
    """The MPI the per-area comparison is about: Baton when it ran, else the
    first MPI."""
    if "baton" in mpi_names:
        return "baton"
    return mpi_names[0] if mpi_names else None


def row_label(e):
    if e["bench"] == "is":
        return "is %d keys, n=%d" % (e["size"], e["ranks"])
    if e["bench"] == "spawn_latency":
        return "spawn_latency %d child%s, n=%d" % (e["size"], "" if e["size"] == 1 else "ren", e["ranks"])
    if e["bench"] in ("spawn_rate", "barrier"):
        return "%s, n=%d" % (e["bench"], e["ranks"])
    return "%s %s, n=%d" % (e["bench"], fmt_size(e["size"]), e["ranks"])


def area_plots(out, rel, mpi_names, ref, prefix=""):
    """One horizontal bar chart per area: for every row, ref's time divided
    by each other MPI's (log scale; left of 1: ref is faster). Rows where an
    MPI has no result are marked "no result". Returns the PNG names."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pngs = []
    others = [m for m in mpi_names if m != ref]
    colour = {m: "C%d" % (i % 10) for i, m in enumerate(mpi_names)}
    for key, title, _ in analysis.AREAS:
        es = [e for e in rel if e["area"] == key]
        if not es or not any(e["rel"] for e in es):
            continue
        present = [m for m in others if any(m in e["times"] for e in es)] or others
        n, k = len(es), max(1, len(present))
        fig, ax = plt.subplots(figsize=(7.5, 0.9 + 0.2 * n * max(1, k * 0.6)))
        h = 0.8 / k
        # beyond CLIP either way the bar stops at the edge and says its value
        clip = 100.0
        vals = [min(max(v, 1 / clip), clip) for e in es for v in e["rel"].values()]
        lo, hi = min(vals + [0.5]), max(vals + [2.0])
        for j, m in enumerate(present):
            ys = [i + (j - (k - 1) / 2) * h for i in range(n)]
            raw = [e["rel"].get(m) for e in es]
            xs = [min(max(x, 1 / clip), clip) if x else None for x in raw]
            # bars grow from 1 to the ratio, to the left when ref is faster
            ax.barh([y for y, x in zip(ys, xs) if x], [x - 1 for x in xs if x], height=h, left=1,
                    color=colour[m], label="%s / %s" % (ref, m))
            for y, x, r in zip(ys, xs, raw):
                if not x:
                    ax.text(1, y, " no result", va="center", fontsize=6, color=colour[m])
                elif x != r:
                    # inside the bar's clipped end
                    ax.text(x, y, " %s " % fmt(r, 2), va="center", ha="right" if r > 1 else "left", fontsize=6)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlim(lo / 1.6, hi * 1.6)
        ax.set_yticks(range(n))
        ax.set_yticklabels([row_label(e) + (" *" if e["noisy"] else "") for e in es], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("%s's time / the other MPI's time (below 1: %s faster; *: noisy row)" % (ref, ref),
                      fontsize=8)
        ax.set_title("%s%s: %s against the others" % (prefix, title, ref), fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(True, axis="x", which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        name = "area_%s.png" % key
        save_png(fig, os.path.join(out, name))
        plt.close(fig)
        pngs.append(name)
    return pngs


def area_markdown(rel, ref, pngs):
    L = ["## By area: %s against the others" % ref, ""]
    L.append("Per area, over every row (benchmark, ranks, size) that %s and at least one other MPI ran, %s's "
             "time / the best other time (below 1: %s is the fastest): geometric mean, lowest and highest "
             "over all rows (medians over rounds); the geometric mean over the rows where no MPI's result is "
             "noisy (median more than %g times its best round: something other than the MPI set the time in "
             "half the rounds or more) and from each MPI's best round; the rows where %s was the fastest."
             % (ref, ref, ref, analysis.NOISY_SPREAD, ref))
    L.append("")
    L.append("| area | rows | noisy rows | geometric mean | lowest | highest | geometric mean, quiet rows | "
             "geometric mean, best rounds | %s fastest in |" % ref)
    L.append("|---|---|---|---|---|---|---|---|---|")
    for a in analysis.area_summary(rel):
        L.append("| %s | %d | %d | %s | %s | %s | %s | %s | %d of %d |" % (
            analysis.AREA_TITLES[a["area"]], a["rows"], a["noisy"], fmt(a["geomean"]), fmt(a["low"]),
            fmt(a["high"]), fmt(a["quiet_geomean"]), fmt(a["best_rounds_geomean"]), a["ahead"], a["rows"]))
    L.append("")
    for key, _, _ in analysis.AREAS:
        if "area_%s.png" % key in pngs:
            L.append("![area %s](area_%s.png)" % (key, key))
            L.append("")
    return L


def markdown(meta, rows, ov, runs, mpi_names, pngs, rel=None, area_ref=None):
    L = []
    mi = meta.get("machine", {})
    L.append("# Benchmark report (%s, mode %s)" % (meta["date"], meta["mode"]))
    L.append("")
    L.append("Machine: %s, %s cores, %s GiB, %s, kernel %s." % (mi.get("cpu_model", "?"), mi.get("cpus"),
                                                                 mi.get("mem_gib"), mi.get("os", "?"),
                                                                 mi.get("kernel")))
    L.append("Rounds: %d (MPIs interleaved within each round); ranks for collectives/topologies/IS: %d; "
             "total run time %ss." % (meta["rounds"], meta["ranks"], meta.get("seconds")))
    L.append("")
    if meta.get("transport", "default") != "default" or meta.get("hosts"):
        L.append("Transport: %s; %s." % (meta.get("transport", "default"),
                                         "hosts %s, started with %s" % (",".join(meta["hosts"]), meta.get("rsh"))
                                         if meta.get("hosts") else "one host"))
        L.append("")
    L.append("| MPI | version | mpicc | mpiexec flags | environment |")
    L.append("|---|---|---|---|---|")
    for m in meta["mpis"]:
        env = " ".join("%s=%s" % kv for kv in sorted(m.get("env", {}).items()))
        L.append("| %s | %s | `%s` | `%s` | %s |" % (m["name"], (m["version"] or m["build_error"])[:90], m["mpicc"],
                                                    " ".join(m["flags"]), "`%s`" % env if env else ""))
    cal = meta.get("calibration_us", {})
    if cal:
        L.append("")
        L.append("Calibration (cache-line ping-pong one-way, per round): " +
                 ", ".join("round %s: %s us (factor %.2f)" % (k, fmt(v), meta["calibration_factors"].get(k, 1.0))
                           for k, v in sorted(cal.items())) +
                 ". Tables and plots show raw times (median over rounds of the per-round medians); "
                 "results.csv also has cal_median_us, the per-round medians divided by the round's factor.")
    L.append("")
    L.append("A time marked * is noisy: the median over rounds is more than %g times the MPI's best round "
             "(results.csv: best_round_us, spread)." % analysis.NOISY_SPREAD)
    L.append("")
    ref = meta.get("reference")
    if ref:
        L.append("Ratios: time of the MPI / time of %s at the same size, where %s has the benchmark (lower "
                 "is better; 1 = as fast as the reference), else / best time among the others." % (ref, ref))
    else:
        L.append("Ratios: time of the MPI / best time among the other MPIs (lower is better; < 1 means it "
                 "beats all others).")
    L.append("")

    lim = [r for r in rows if r["mpi"] == "machine"]
    if lim:
        L.append("## Machine limits")
        L.append("")
        L.append("| probe | size | min (us) | median (us) | MB/s (median) |")
        L.append("|---|---|---|---|---|")
        for r in lim:
            L.append("| %s | %s | %s | %s | %s |" % (r["bench"], fmt_size(r["size"]), fmt(r["min_us"], 4),
                                                     fmt(r["median_us"], 4), fmt(r["mbps"]) if r["mbps"] else "–"))
        L.append("")

    bad = [r for r in runs if r["status"] != "ok"]
    L.append("## Failures")
    L.append("")
    if not bad:
        L.append("None: every benchmark ran on every MPI.")
    else:
        L.append("| MPI | job | ranks | round | status | reason |")
        L.append("|---|---|---|---|---|---|")
        for r in bad:
            L.append("| %s | %s (%s) | %d | %d | %s | %s |" % (r["mpi"], r["job"], ",".join(r["benches"]),
                                                              r["ranks"], r["round"], r["status"],
                                                              r["reason"].replace("|", "/")))
    L.append("")
    if rel:
        L += area_markdown(rel, area_ref, pngs)

    benches = [b for b in ORDER if any(r["bench"] == b for r in rows)]
    for b in benches:
        brs = [r for r in rows if r["bench"] == b and r["mpi"] != "machine"]
        present = [m for m in mpi_names if any(r["mpi"] == m for r in brs)]
        bw = b in BW_BENCHES and b != "pingpong"
        L.append("## %s" % b)
        L.append("")
        if b + ".png" in pngs:
            L.append("![%s](%s.png)" % (b, b))
            L.append("")
        head = ["ranks", "size"] + ["%s us" % m for m in present]
        if bw:
            head += ["%s MB/s" % m for m in present]
        extra = {"mbw_mr": "msg_rate", "spawn_rate": "rate_per_s", "is": "mkeys_per_s",
                 "rma_fop_contended": "ops_per_s", "rma_cas_contended": "ops_per_s"}.get(b)
        if extra:
            head += ["%s %s" % (m, extra) for m in present]
        vs_ref = ref in present
        rat_cols = [m for m in present if m != ref] if vs_ref else present
        if len(present) > 1:
            head += ["%s / %s" % (m, ref) if vs_ref else "%s ratio" % m for m in rat_cols]
        L.append("| " + " | ".join(head) + " |")
        L.append("|" + "---|" * len(head))
        keys = sorted({(r["ranks"], r["size"]) for r in brs})
        for ranks, size in keys:
            by = {r["mpi"]: r for r in brs if r["ranks"] == ranks and r["size"] == size}
            sz = ("class %s (%d keys)" % (next(iter(by.values())).get("class", "?"), size) if b == "is"
                  else "%d children" % size if b == "spawn_latency" else fmt_size(size))
            cells = [str(ranks), sz]
            # a byte stream has no zero-byte message: nothing to measure there
            cells += [fmt(by[m]["median_us"]) + (" *" if analysis.is_noisy(by[m]) else "") if m in by
                      else "n/a" if size == 0 and m.startswith("rawtcp") else "failed" for m in present]
            if bw:
                cells += [fmt(by[m]["mbps"]) if m in by else "–" for m in present]
            if extra:
                cells += [fmt(by[m].get(extra)) if m in by else "–" for m in present]
            if len(present) > 1:
                times = {m: by[m]["median_us"] for m in present if m in by}
                if vs_ref:  # "–" where the reference has no such size (raw TCP: 0 bytes)
                    rat = {m: t / times[ref] for m, t in times.items()} if times.get(ref) else {}
                else:
                    rat = analysis.ratios_to_best_other(times)
                cells += [fmt(rat.get(m)) if rat.get(m) is not None else "–" for m in rat_cols]
            L.append("| " + " | ".join(cells) + " |")
        L.append("")

    dr = analysis.ddt_ratios(rows)
    if dr:
        L.append("## Derived datatypes: non-contiguous / contiguous")
        L.append("")
        L.append("Ping-pong time of the derived-datatype message divided by ddt_contig (MPI_DOUBLE) at the same "
                 "payload, per MPI (1 = as fast as contiguous; the goal for large messages is <= 1.5). "
                 "ddt_vector: matrix column (MPI_Type_vector) <-> contiguous doubles; ddt_vector_vv: column on "
                 "both sides; ddt_struct: array of {double, int, char[3]} (resized struct type).")
        L.append("")
        if "ddt_ratio.png" in pngs:
            L.append("![ddt_ratio](ddt_ratio.png)")
            L.append("")
        present = [m for m in mpi_names if any(r["mpi"] == m for r in dr)]
        head = ["bench", "size"] + ["%s ratio" % m for m in present]
        L.append("| " + " | ".join(head) + " |")
        L.append("|" + "---|" * len(head))
        for b in analysis.DDT_NONCONTIG:
            for size in sorted({r["size"] for r in dr if r["bench"] == b}):
                by = {r["mpi"]: r for r in dr if r["bench"] == b and r["size"] == size}
                cells = [b, fmt_size(size)] + [fmt(by[m]["ratio"]) if m in by else "–" for m in present]
                L.append("| " + " | ".join(cells) + " |")
        L.append("")

    if ov:
        L += overlap_markdown(ov, mpi_names, pngs)
    return "\n".join(L) + "\n"


def _eff(row):
    return fmt(row["efficiency"], 2) + (" *" if row.get("noisy") else "")


def overlap_markdown(ov, mpi_names, pngs):
    """The overlap section: every MPI's efficiency side by side, then per
    benchmark T0, saturation and efficiency."""
    L = ["## Overlap of communication and computation", ""]
    L.append("T0: time of the communication (Isend/Irecv or the nonblocking collective) + Wait without "
             "computation; s: saturation (computation time beyond which the total grows); eff: share of T0 "
             "hidden behind computation (1: all of it, 0: none). Medians over the quiet rounds: a round is "
             "disturbed when a computation alone took more than %g times the time asked for, its T0 more "
             "than %g times the best round's, or a total more than %g times T0 + computation (a rank lost "
             "its core to another program); * marks a result from disturbed rounds only, which says "
             "little." % ((analysis.NOISY_SPREAD,) * 3))
    L.append("")
    kinds = analysis.overlap_order(r["bench"] for r in ov)
    present = [m for m in mpi_names if any(r["mpi"] == m for r in ov)]
    present += sorted({r["mpi"] for r in ov} - set(present))
    L.append("| benchmark | size | " + " | ".join("%s eff" % m for m in present) + " |")
    L.append("|" + "---|" * (2 + len(present)))
    for kind in kinds:
        for size in sorted({r["size"] for r in ov if r["bench"] == kind}):
            by = {r["mpi"]: r for r in ov if r["bench"] == kind and r["size"] == size}
            L.append("| " + " | ".join([kind, fmt_size(size)] + [_eff(by[m]) if m in by else "–"
                                                                  for m in present]) + " |")
    L.append("")
    for kind in kinds:
        pts = [r for r in ov if r["bench"] == kind]
        if kind + ".png" in pngs:
            L.append("![%s](%s.png)" % (kind, kind))
            L.append("")
        present = [m for m in mpi_names if any(r["mpi"] == m for r in pts)]
        present += sorted({r["mpi"] for r in pts} - set(present))
        head = ["size"] + sum([["%s T0 us" % m, "%s s us" % m, "%s eff" % m] for m in present], [])
        title = analysis.OVERLAP_TITLES.get(kind)
        L.append("**%s**%s" % (kind, ": " + title if title else ""))
        L.append("")
        L.append("| " + " | ".join(head) + " |")
        L.append("|" + "---|" * len(head))
        for size in sorted({r["size"] for r in pts}):
            by = {r["mpi"]: r for r in pts if r["size"] == size}
            cells = [fmt_size(size)]
            for m in present:
                r = by.get(m)
                cells += [fmt(r["comm_us"]), fmt(r["saturation_us"]), _eff(r)] if r \
                    else ["failed"] * 3
            L.append("| " + " | ".join(cells) + " |")
        L.append("")
    return L
