"""Unit tests of the overlap benchmarks' runner side and of MPI settings
variants (--mpi NAME:VAR=VAL): python3 -m pytest bench/tests"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runner import analysis, main as runner_main, mpis, report  # noqa: E402


def found():
    return {"baton": mpis.MPI("baton", "/p/mpicc", "/p/mpiexec"),
            "mpich": mpis.MPI("mpich", "mpicc.mpich", "mpiexec.mpich"),
            "openmpi": mpis.MPI("openmpi", "mpicc.openmpi", "mpiexec.openmpi", ["--oversubscribe"],
                                {"OMPI_ALLOW_RUN_AS_ROOT": "1"})}


def ov(mpi, bench, size, t0, points, rnd=1):
    """Overlap records as mpibench prints them: T0 first, then (compute,
    total) pairs."""
    recs = [{"mpi": mpi, "bench": bench, "size": size, "ranks": 2, "round": rnd, "min_us": t0,
             "median_us": t0, "mbps": 0.0, "compute_us": 0, "nominal_us": 0, "comm_us": t0}]
    for c, t in points:
        recs.append({"mpi": mpi, "bench": bench, "size": size, "ranks": 2, "round": rnd, "min_us": t,
                     "median_us": t, "mbps": 0.0, "compute_us": c, "nominal_us": c, "comm_us": t0})
    return recs


class VariantSpec(unittest.TestCase):
    def test_plain_name(self):
        self.assertEqual(mpis.parse_variant(" mpich "), ("mpich", "mpich", {}))

    def test_settings_make_the_label(self):
        self.assertEqual(mpis.parse_variant("baton:BATON_PROGRESS=thread"),
                         ("baton[BATON_PROGRESS=thread]", "baton", {"BATON_PROGRESS": "thread"}))
        self.assertEqual(mpis.parse_variant("mpich:MPIR_CVAR_ASYNC_PROGRESS=1:BENCH_THREAD_MULTIPLE=1"),
                         ("mpich[MPIR_CVAR_ASYNC_PROGRESS=1:BENCH_THREAD_MULTIPLE=1]", "mpich",
                          {"MPIR_CVAR_ASYNC_PROGRESS": "1", "BENCH_THREAD_MULTIPLE": "1"}))

    def test_short_label_and_empty_value(self):
        self.assertEqual(mpis.parse_variant("bt=baton:BATON_PROGRESS=thread:X="),
                         ("bt", "baton", {"BATON_PROGRESS": "thread", "X": ""}))

    def test_malformed(self):
        for bad in ("baton:BATON_PROGRESS", "baton:=1", "baton:1X=2", "bt=baton", ":X=1",
                    "baton:X=1:X=2", "=baton:X=1"):
            with self.assertRaises(ValueError, msg=bad):
                mpis.parse_variant(bad)


class VariantMPI(unittest.TestCase):
    def test_env_reaches_the_ranks(self):
        f = found()
        ch = runner_main.choose_mpis("baton,baton:BATON_PROGRESS=thread,openmpi:OMPI_MCA_x=2", f)
        self.assertEqual([m.name for m in ch], ["baton", "baton[BATON_PROGRESS=thread]", "openmpi[OMPI_MCA_x=2]"])
        base, thr, om = ch
        self.assertIs(base, f["baton"])
        self.assertNotIn("BATON_PROGRESS", base.env)
        self.assertEqual(thr.run_env()["BATON_PROGRESS"], "thread")
        # on the launcher's command line too (hosts started remotely)
        self.assertEqual(thr.launch(2, ["overlap_sender"]),
                         ["/p/mpiexec", "-genv", "BATON_PROGRESS", "thread", "-n", "2", base.binary,
                          "overlap_sender"])
        self.assertEqual(om.flags, ["--oversubscribe", "-x", "OMPI_MCA_x=2"])
        self.assertEqual(om.env["OMPI_ALLOW_RUN_AS_ROOT"], "1")
        # the base MPI is left as it was
        self.assertEqual(f["openmpi"].flags, ["--oversubscribe"])
        self.assertNotIn("OMPI_MCA_x", f["openmpi"].env)

    def test_variant_shares_the_build(self):
        f = found()
        thr = runner_main.choose_mpis("mpich:MPIR_CVAR_ASYNC_PROGRESS=1", f)[0]
        self.assertEqual(thr.binary, f["mpich"].binary)
        self.assertEqual(thr.base, "mpich")
        self.assertEqual(thr.launch(2, [])[1:4], ["-genv", "MPIR_CVAR_ASYNC_PROGRESS", "1"])

    def test_variant_keeps_the_transport(self):
        f = mpis.apply_transport(found(), "tcp")
        thr = runner_main.choose_mpis("baton:BATON_PROGRESS=thread", f)[0]
        self.assertEqual(thr.env["BATON_TRANSPORTS"], "tcp")
        self.assertEqual(thr.flags, ["-genv", "BATON_TRANSPORTS", "tcp", "-genv", "BATON_PROGRESS", "thread"])

    def test_variant_across_hosts(self):
        f = mpis.apply_transport(found(), "tcp", ["bh1", "bh2"], "/r/rsh", "eth0", "bh0")
        ch = runner_main.choose_mpis("baton:BATON_PROGRESS=thread,mpich:MPIR_CVAR_ASYNC_PROGRESS=1,"
                                     "openmpi:OMPI_MCA_x=1", f)
        cmds = [" ".join(m.launch(2, ["overlap_receiver"])) for m in ch]
        self.assertIn("-hosts bh1,bh2 --rsh /r/rsh -genv BATON_PROGRESS thread -n 2", cmds[0])
        self.assertIn("-localhost bh0 -genv MPIR_CVAR_ASYNC_PROGRESS 1 -n 2", cmds[1])
        self.assertIn("plm_rsh_agent /r/rsh -x OMPI_MCA_x=1 -n 2", cmds[2])

    def test_unknown_and_twice(self):
        msgs = []
        self.assertEqual(runner_main.choose_mpis("nope:X=1", found(), msgs.append), [])
        self.assertIn("'nope' not found", msgs[0])
        with self.assertRaises(ValueError):
            runner_main.choose_mpis("baton:X=1,baton:X=1", found())

    def test_file_label(self):
        self.assertEqual(runner_main.file_label("baton[BATON_PROGRESS=thread]"), "baton_BATON_PROGRESS_thread")


class Jobs(unittest.TestCase):
    def test_overlap_group_has_every_form_in_three_jobs(self):
        self.assertEqual(runner_main.GROUPS["overlap"], analysis.OVERLAP_BENCHES)
        for b in ("overlap_sender", "overlap_receiver", "overlap_ibarrier", "overlap_iallreduce"):
            self.assertIn(b, runner_main.ALL_BENCHES)
        jobs = runner_main.make_jobs(runner_main.GROUPS["overlap"], "quick", 8, 1.0)
        self.assertEqual([(j.name, j.benches, j.ranks) for j in jobs],
                         [("overlap", ["overlap_fixed", "overlap_daxpy"], 2),
                          ("overlap_wait", ["overlap_sender", "overlap_receiver"], 2),
                          ("overlap_coll", ["overlap_ibarrier", "overlap_iallreduce"], 2)])
        sizes = [int(s) for s in jobs[1].args[jobs[1].args.index("--sizes") + 1].split(",")]
        for s in (64 * 1024, 1 << 20, 4 << 20):
            self.assertIn(s, sizes)

    def test_one_form_alone(self):
        jobs = runner_main.make_jobs(["overlap_receiver"], "smoke", 2, 1.0)
        self.assertEqual(len(jobs), 1)
        self.assertEqual(jobs[0].args[:2], ["overlap_receiver", "--smoke"])


class Analysis(unittest.TestCase):
    def records(self):
        r = []
        # sender form, all hidden: total = compute once compute >= T0
        r += ov("mpich", "overlap_sender", 1 << 20, 70.0, [(35.0, 71.0), (70.0, 72.0), (105.0, 107.0),
                                                           (210.0, 212.0)])
        # receiver form, nothing hidden: total = T0 + compute
        r += ov("baton", "overlap_receiver", 1 << 20, 60.0, [(30.0, 90.0), (60.0, 120.0), (90.0, 150.0),
                                                             (180.0, 240.0)])
        r += ov("baton[BATON_PROGRESS=thread]", "overlap_receiver", 1 << 20, 62.0,
                [(31.0, 63.0), (62.0, 64.0), (93.0, 95.0), (186.0, 188.0)])
        r += ov("baton", "overlap_ibarrier", 0, 0.4, [(0.2, 0.6), (0.4, 0.6), (0.6, 0.8), (1.2, 1.4)])
        # half hidden at c = T0
        r += ov("mpich", "overlap_iallreduce", 1 << 20, 100.0, [(100.0, 150.0), (300.0, 350.0)])
        return r

    def test_summary_of_the_new_forms(self):
        rows = {(r["mpi"], r["bench"], r["size"]): r for r in analysis.overlap_summary(self.records())}
        self.assertAlmostEqual(rows[("mpich", "overlap_sender", 1 << 20)]["efficiency"], 0.971, places=3)
        self.assertEqual(rows[("baton", "overlap_receiver", 1 << 20)]["efficiency"], 0.0)
        self.assertAlmostEqual(rows[("baton[BATON_PROGRESS=thread]", "overlap_receiver", 1 << 20)]["efficiency"],
                               60 / 62, places=3)
        self.assertAlmostEqual(rows[("mpich", "overlap_iallreduce", 1 << 20)]["efficiency"], 0.5)
        self.assertEqual(rows[("baton", "overlap_ibarrier", 0)]["comm_us"], 0.4)
        # no overlap record counts among the ordinary results
        self.assertEqual(analysis.aggregate(self.records()), [])

    def test_disturbed_rounds_are_left_out(self):
        recs = ov("mpich", "overlap_receiver", 1 << 20, 70.0, [(35.0, 105.0), (70.0, 140.0)], rnd=1)
        # round 2: the computing rank lost its core (compute alone 9 ms for
        # 70 us asked), and T0 with it
        bad = ov("mpich", "overlap_receiver", 1 << 20, 16000.0, [(9000.0, 16000.0), (9100.0, 16000.0)], rnd=2)
        bad[2]["nominal_us"] = 70.0
        bad[1]["nominal_us"] = 35.0
        self.assertTrue(analysis.overlap_disturbed(bad))
        self.assertFalse(analysis.overlap_disturbed(recs))
        rows = analysis.overlap_summary(recs + bad)
        self.assertEqual(len(rows), 1)
        self.assertEqual((rows[0]["efficiency"], rows[0]["comm_us"], rows[0]["rounds"], rows[0]["disturbed"],
                          rows[0]["noisy"]), (0.0, 70.0, 1, 1, False))
        # only disturbed rounds: their result, marked
        rows = analysis.overlap_summary(bad)
        self.assertTrue(rows[0]["noisy"])
        self.assertEqual(rows[0]["comm_us"], 16000.0)
        md = "\n".join(report.overlap_markdown(rows, ["mpich"], []))
        self.assertIn("| overlap_receiver | 1 MiB | 1 * |", md)

    def test_disturbed_t0_or_total(self):
        quiet = ov("baton", "overlap_sender", 4 << 20, 170.0, [(85.0, 215.0), (170.0, 300.0), (340.0, 345.0)])
        # T0 of a slow round, the computation alone as asked
        slow_t0 = ov("baton", "overlap_sender", 4 << 20, 8600.0, [(4300.0, 9000.0), (5000.0, 9800.0)], rnd=2)
        # one total of milliseconds
        slow_total = ov("baton", "overlap_sender", 4 << 20, 180.0, [(87.0, 12600.0), (180.0, 300.0)], rnd=3)
        self.assertFalse(analysis.overlap_disturbed(quiet))
        self.assertFalse(analysis.overlap_disturbed(slow_t0))  # alone, nothing to compare T0 with
        self.assertTrue(analysis.overlap_disturbed(slow_t0, t0_best=170.0))
        self.assertTrue(analysis.overlap_disturbed(slow_total))
        # no overlap at all is not a disturbance
        self.assertFalse(analysis.overlap_disturbed(
            ov("baton", "overlap_receiver", 4 << 20, 170.0, [(85.0, 255.0), (170.0, 340.0), (340.0, 510.0)])))
        rows = analysis.overlap_summary(quiet + slow_t0 + slow_total)
        self.assertEqual((rows[0]["rounds"], rows[0]["disturbed"], rows[0]["comm_us"]), (1, 2, 170.0))

    def test_order(self):
        self.assertEqual(analysis.overlap_order(["overlap_zzz", "overlap_iallreduce", "overlap_fixed",
                                                 "overlap_sender", "overlap_fixed"]),
                         ["overlap_fixed", "overlap_sender", "overlap_iallreduce", "overlap_zzz"])

    def test_report_tables(self):
        names = ["baton", "baton[BATON_PROGRESS=thread]", "mpich"]
        ovs = analysis.overlap_summary(self.records())
        md = "\n".join(report.overlap_markdown(ovs, names, ["overlap_receiver.png"]))
        self.assertIn("| benchmark | size | baton eff | baton[BATON_PROGRESS=thread] eff | mpich eff |", md)
        self.assertIn("| overlap_receiver | 1 MiB | 0 | 0.97 | – |", md)
        self.assertIn("| overlap_sender | 1 MiB | – | – | 0.97 |", md)
        self.assertIn("| overlap_ibarrier | 0 B | 0.5 | – | – |", md)
        self.assertIn("**overlap_iallreduce**: every rank computes", md)
        self.assertIn("| size | baton T0 us | baton s us | baton eff | baton[BATON_PROGRESS=thread] T0 us |", md)
        self.assertIn("![overlap_receiver](overlap_receiver.png)", md)
        # the forms in report order
        self.assertLess(md.index("**overlap_sender**"), md.index("**overlap_receiver**"))
        self.assertLess(md.index("**overlap_receiver**"), md.index("**overlap_ibarrier**"))

    def test_write_all(self):
        import csv
        import tempfile
        names = ["baton", "baton[BATON_PROGRESS=thread]", "mpich"]
        meta = {"date": "d", "mode": "quick", "rounds": 1, "ranks": 2, "machine": {}, "calibration_us": {},
                "mpis": [{"name": m, "version": "v", "build_error": "", "mpicc": "", "flags": [], "env": {}}
                         for m in names]}
        with tempfile.TemporaryDirectory() as d:
            md = report.write_all(d, meta, self.records(), [], plots=False)
            self.assertIn("| overlap_receiver | 1 MiB | 0 | 0.97 | – |", md)
            with open(os.path.join(d, "overlap.csv")) as f:
                rows = list(csv.DictReader(f))
            self.assertEqual(len(rows), 5)
            self.assertEqual({r["noisy"] for r in rows}, {"False"})

    def test_plots_skip_size_zero(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("no matplotlib")
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            pngs = report.make_plots(d, [], analysis.overlap_summary(self.records()),
                                     ["baton", "baton[BATON_PROGRESS=thread]", "mpich"])
            self.assertEqual(sorted(pngs), ["overlap_iallreduce.png", "overlap_receiver.png", "overlap_sender.png"])


if __name__ == "__main__":
    unittest.main()
