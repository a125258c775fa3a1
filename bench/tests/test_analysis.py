"""Unit tests of the runner's analysis: python3 -m pytest bench/tests"""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runner import analysis, main as runner_main, mpis, report  # noqa: E402


def rec(mpi, bench, size, med, rnd=1, ranks=2, mn=None, mbps=0.0, **kw):
    r = {"mpi": mpi, "bench": bench, "size": size, "ranks": ranks, "round": rnd,
         "min_us": med if mn is None else mn, "median_us": med, "mbps": mbps}
    r.update(kw)
    return r


class Median(unittest.TestCase):
    def test_odd_even_empty(self):
        self.assertEqual(analysis.median([3, 1, 2]), 2)
        self.assertEqual(analysis.median([4, 1, 2, 3]), 2.5)
        self.assertIsNone(analysis.median([]))
        self.assertEqual(analysis.median([None, 5.0]), 5.0)


class Parse(unittest.TestCase):
    def test_records_errors_and_noise(self):
        text = "\n".join([
            "Warning: some banner",
            '{"bench":"pingpong","size":8,"ranks":2,"min_us":0.5,"median_us":0.6,"mbps":13.3}',
            '{"bench":"spawn","error":"MPI_Comm_spawn failed: no"}',
            '{"broken json',
            '{"version":"x"}',
            "",
        ])
        recs, errs = analysis.parse_output(text)
        self.assertEqual(len(recs), 1)
        self.assertEqual(recs[0]["size"], 8)
        self.assertEqual(errs, ["MPI_Comm_spawn failed: no"])

    def test_parse_real_line_from_the_c_code_format(self):
        line = ('{"bench":"bw","size":1048576,"ranks":2,"min_us":174.9838,"median_us":180.9643,'
                '"mean_us":183.9831,"mbps":5794.380,"samples":5,"iters":5,"stable":false,"window":64}')
        recs, errs = analysis.parse_output(line)
        self.assertEqual(recs[0]["window"], 64)
        self.assertFalse(recs[0]["stable"])


class Classify(unittest.TestCase):
    ok_line = '{"bench":"pingpong","size":8,"ranks":2,"min_us":1,"median_us":1,"mbps":8}\n'

    def test_ok(self):
        st, why, recs = analysis.classify_run(0, False, 10, self.ok_line, "", ["pingpong"])
        self.assertEqual((st, why, len(recs)), ("ok", "", 1))

    def test_timeout_keeps_partial_results(self):
        st, why, recs = analysis.classify_run(-9, True, 15, self.ok_line, "", ["pingpong"])
        self.assertEqual(st, "failed")
        self.assertIn("timed out after 15s", why)
        self.assertEqual(len(recs), 1)

    def test_nonzero_exit_uses_error_line_then_stderr(self):
        st, why, _ = analysis.classify_run(1, False, 10, '{"bench":"spawn","error":"spawn not supported"}', "x")
        self.assertEqual(st, "failed")
        self.assertEqual(why, "exit code 1: spawn not supported")
        st, why, _ = analysis.classify_run(134, False, 10, "", "line one\nAssertion failed in foo.c\n")
        self.assertEqual(why, "exit code 134: Assertion failed in foo.c")
        ompi = ("[vm:1] *** End of error message ***\n" + "-" * 74 +
                "\nmpiexec noticed that process rank 1 with PID 0 on node vm exited on signal 11 (Segmentation "
                "fault).\n" + "-" * 74 + "\n")
        st, why, _ = analysis.classify_run(139, False, 10, "", ompi)
        self.assertEqual(why, "exit code 139: mpiexec noticed that process rank 1 with PID 0 on node vm exited on "
                              "signal 11 (Segmentation fault).")

    def test_signal(self):
        st, why, _ = analysis.classify_run(-11, False, 10, "", "")
        self.assertTrue(why.startswith("killed by signal 11"))

    def test_exit_zero_but_error_or_nothing_or_missing(self):
        self.assertEqual(analysis.classify_run(0, False, 10, '{"error":"bad"}', "")[0], "failed")
        st, why, _ = analysis.classify_run(0, False, 10, "hello\n", "")
        self.assertEqual((st, why), ("failed", "no results"))
        st, why, _ = analysis.classify_run(0, False, 10, self.ok_line, "", ["pingpong", "bw"])
        self.assertEqual((st, why), ("failed", "no results for bw"))

    def test_long_reason_is_clipped_to_one_line(self):
        _, why, _ = analysis.classify_run(1, False, 10, "", "x" * 1000 + "\n")
        self.assertLessEqual(len(why), 300)
        self.assertNotIn("\n", why)


class Saturation(unittest.TestCase):
    def test_perfect_overlap(self):
        # total = max(T0, c): flat until c reaches T0 = 100
        pts = [(0, 100), (25, 100), (50, 101), (75, 100), (100, 102), (150, 150), (200, 200)]
        s = analysis.saturation(pts)
        self.assertGreater(s, 100)
        self.assertLess(s, 150)
        # interpolation: threshold 110.5 crossed between (100,102) and (150,150)
        self.assertAlmostEqual(s, 100 + (110.5 - 102) * 50 / 48, places=6)

    def test_no_overlap(self):
        # total = T0 + c: grows right away
        pts = [(0, 100), (25, 125), (50, 150), (100, 200)]
        s = analysis.saturation(pts)
        self.assertLess(s, 25)

    def test_never_crosses_gives_largest_c(self):
        self.assertEqual(analysis.saturation([(0, 10), (5, 10), (8, 10.2)]), 8)

    def test_unsorted_input_and_empty(self):
        self.assertEqual(analysis.saturation([(50, 150), (0, 100), (25, 125)]),
                         analysis.saturation([(0, 100), (25, 125), (50, 150)]))
        self.assertIsNone(analysis.saturation([]))


class Efficiency(unittest.TestCase):
    def test_full_overlap(self):
        self.assertAlmostEqual(analysis.efficiency([(0, 100), (50, 100), (100, 100), (200, 200)]), 1.0)

    def test_no_overlap(self):
        self.assertAlmostEqual(analysis.efficiency([(0, 100), (50, 150), (100, 200), (200, 300)]), 0.0)

    def test_half(self):
        # at c = 100: total 150 -> hidden 50 of 100
        self.assertAlmostEqual(analysis.efficiency([(0, 100), (100, 150)]), 0.5)

    def test_uses_smallest_c_at_least_t0_and_clamps(self):
        self.assertAlmostEqual(analysis.efficiency([(0, 100), (50, 140), (120, 170), (300, 300)]), 0.5)
        self.assertEqual(analysis.efficiency([(0, 100), (100, 90)]), 1.0)   # noise below T0
        self.assertEqual(analysis.efficiency([(0, 100), (100, 260)]), 0.0)  # slower than serial

    def test_short_compute_only(self):
        # no c >= T0: use the largest, normalise by c
        self.assertAlmostEqual(analysis.efficiency([(0, 100), (20, 100), (40, 100)]), 1.0)

    def test_missing_base(self):
        self.assertIsNone(analysis.efficiency([(10, 100)]))


class Aggregate(unittest.TestCase):
    def test_rounds_and_calibration(self):
        recs = [rec("a", "pingpong", 8, 1.0, rnd=1, mn=0.9), rec("a", "pingpong", 8, 2.0, rnd=2, mn=1.8),
                rec("a", "pingpong", 8, 3.0, rnd=3, mn=2.5), rec("b", "pingpong", 8, 5.0, rnd=1)]
        f = analysis.calibration_factors({1: 1.0, 2: 2.0, 3: 1.0})
        self.assertEqual(f, {1: 1.0, 2: 2.0, 3: 1.0})
        rows = {r["mpi"]: r for r in analysis.aggregate(recs, f)}
        self.assertEqual(rows["a"]["median_us"], 2.0)
        self.assertEqual(rows["a"]["min_us"], 0.9)
        self.assertEqual(rows["a"]["cal_median_us"], 1.0)  # 1, 2/2, 3 -> 1
        self.assertEqual(rows["a"]["rounds"], 3)
        self.assertEqual(rows["b"]["rounds"], 1)

    def test_missing_calibration_is_neutral(self):
        self.assertEqual(analysis.calibration_factors({1: None, 2: 0.5}), {1: 1.0, 2: 1.0})

    def test_ranks_are_part_of_the_key(self):
        recs = [rec("a", "pingpong", 8, 1.0, ranks=2), rec("a", "pingpong", 8, 9.0, ranks=8)]
        self.assertEqual(len(analysis.aggregate(recs)), 2)

    def test_overlap_records_are_separate(self):
        recs = [rec("a", "overlap_fixed", 1024, 100, compute_us=0), rec("a", "overlap_fixed", 1024, 100,
                                                                        compute_us=100)]
        self.assertEqual(analysis.aggregate(recs), [])
        ov = analysis.overlap_summary(recs)
        self.assertEqual(len(ov), 1)
        self.assertAlmostEqual(ov[0]["efficiency"], 1.0)
        self.assertEqual(ov[0]["comm_us"], 100)


class Ratios(unittest.TestCase):
    def test_ratio_to_best_other(self):
        r = analysis.ratios_to_best_other({"baton": 1.0, "mpich": 2.0, "openmpi": 4.0})
        self.assertEqual(r, {"baton": 0.5, "mpich": 2.0, "openmpi": 4.0})

    def test_single_and_missing(self):
        self.assertEqual(analysis.ratios_to_best_other({"mpich": 2.0}), {"mpich": None})
        self.assertEqual(analysis.ratios_to_best_other({"a": 2.0, "b": None}), {"a": None, "b": None})


class Areas(unittest.TestCase):
    def test_area_of(self):
        self.assertEqual(analysis.area_of("pingpong", 2, 2), "p2p")
        self.assertEqual(analysis.area_of("pingpong", 8, 2), "oversub")  # more ranks than cores
        self.assertEqual(analysis.area_of("pingpong", 8, 16), "p2p")
        self.assertEqual(analysis.area_of("token", 4, 2), "oversub")
        self.assertEqual(analysis.area_of("allreduce", 8, 2), "coll")
        self.assertEqual(analysis.area_of("ddt_struct", 2, 2), "ddt")
        self.assertEqual(analysis.area_of("spawn_pp_inter", 2, 2), "spawn")
        self.assertIsNone(analysis.area_of("lim_cacheline", 1, 2))
        self.assertIsNone(analysis.area_of("overlap_fixed", 2, 2))

    def rows(self):
        recs = [rec("baton", "pingpong", 8, 1.0), rec("mpich", "pingpong", 8, 2.0),
                rec("openmpi", "pingpong", 8, 4.0),
                rec("baton", "bw", 8, 3.0), rec("openmpi", "bw", 8, 2.0),  # mpich has no result
                rec("baton", "allreduce", 8, 5.0, ranks=8), rec("mpich", "allreduce", 8, 5.0, ranks=8),
                rec("baton", "is", 65536, 7.0),  # nobody to compare with
                rec("mpich", "barrier", 0, 1.0),  # the reference has no result
                rec("machine", "lim_cacheline", 64, 0.03)]
        return analysis.aggregate(recs)

    def test_relative_rows(self):
        rel = analysis.relative_rows(self.rows(), "baton", 2)
        self.assertEqual([(e["area"], e["bench"]) for e in rel],
                         [("p2p", "bw"), ("p2p", "pingpong"), ("coll", "allreduce"), ("is", "is")])
        by = {e["bench"]: e for e in rel}
        self.assertEqual(by["pingpong"]["rel"], {"mpich": 0.5, "openmpi": 0.25})
        self.assertEqual(by["pingpong"]["best"], 0.5)
        self.assertEqual(by["bw"]["rel"], {"openmpi": 1.5})
        self.assertEqual(by["bw"]["best"], 1.5)
        self.assertEqual(by["allreduce"]["best"], 1.0)
        self.assertIsNone(by["is"]["best"])
        self.assertEqual(by["is"]["rel"], {})

    def test_area_summary(self):
        s = analysis.area_summary(analysis.relative_rows(self.rows(), "baton", 2))
        self.assertEqual([a["area"] for a in s], ["p2p", "coll"])  # is: no other MPI
        p2p = s[0]
        self.assertEqual((p2p["rows"], p2p["low"], p2p["high"], p2p["ahead"]), (2, 0.5, 1.5, 1))
        self.assertAlmostEqual(p2p["geomean"], (0.5 * 1.5) ** 0.5)
        self.assertEqual((s[1]["rows"], s[1]["ahead"]), (1, 0))  # a tie is not ahead

    def test_noisy_rows_and_best_rounds(self):
        # baton: quiet (1.0, 1.1, 1.2); mpich: two of three rounds 8 ms (a time slice)
        recs = [rec("baton", "pingpong", 8, v, rnd=i + 1) for i, v in enumerate((1.0, 1.1, 1.2))] + \
               [rec("mpich", "pingpong", 8, v, rnd=i + 1) for i, v in enumerate((0.8, 8000.0, 8000.0))] + \
               [rec("baton", "bw", 8, 2.0), rec("mpich", "bw", 8, 4.0)]
        rows = {(r["mpi"], r["bench"]): r for r in analysis.aggregate(recs)}
        self.assertEqual(rows[("mpich", "pingpong")]["best_round_us"], 0.8)
        self.assertEqual(rows[("mpich", "pingpong")]["spread"], 10000.0)
        self.assertTrue(analysis.is_noisy(rows[("mpich", "pingpong")]))
        self.assertFalse(analysis.is_noisy(rows[("baton", "pingpong")]))  # 1.1 / 1.0
        rel = {e["bench"]: e for e in analysis.relative_rows(list(rows.values()), "baton", 2)}
        self.assertEqual(rel["pingpong"]["noisy"], ["mpich"])
        self.assertAlmostEqual(rel["pingpong"]["best"], 1.1 / 8000.0)
        self.assertAlmostEqual(rel["pingpong"]["best_rounds"], 1.0 / 0.8)
        self.assertEqual(rel["bw"]["noisy"], [])
        (p2p,) = analysis.area_summary(list(rel.values()))
        self.assertEqual((p2p["rows"], p2p["noisy"]), (2, 1))
        self.assertAlmostEqual(p2p["quiet_geomean"], 0.5)  # bw only
        self.assertAlmostEqual(p2p["best_rounds_geomean"], (1.25 * 0.5) ** 0.5)

    def test_noisy_cells_are_marked(self):
        recs = [rec("baton", "pingpong", 8, v, rnd=i + 1) for i, v in enumerate((1.0, 9.0, 9.0))] + \
               [rec("mpich", "pingpong", 8, 2.0)]
        meta = {"date": "d", "mode": "quick", "rounds": 3, "ranks": 2, "machine": {"cpus": 2},
                "calibration_us": {},
                "mpis": [{"name": "baton", "version": "v", "build_error": "", "mpicc": "c", "flags": []},
                         {"name": "mpich", "version": "w", "build_error": "", "mpicc": "c", "flags": []}]}
        with tempfile.TemporaryDirectory() as d:
            md = report.write_all(d, meta, recs, [], plots=False)
        self.assertIn("| 2 | 8 B | 9 * | 2 |", md)

    def test_area_plots(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("no matplotlib")
        recs = [rec("baton", "pingpong", 8, 1.0), rec("mpich", "pingpong", 8, 2.0),
                rec("baton", "pingpong", 1024, 1.0), rec("mpich", "pingpong", 1024, 1e6),  # clipped
                rec("baton", "token", 8, 1.0, ranks=4),  # mpich has no result: "no result"
                rec("baton", "allreduce", 8, 3.0), rec("mpich", "allreduce", 8, 1.5)]
        meta = {"date": "d", "mode": "quick", "rounds": 1, "ranks": 2, "machine": {"cpus": 2},
                "calibration_us": {},
                "mpis": [{"name": m, "version": "v", "build_error": "", "mpicc": "c", "flags": []}
                         for m in ("baton", "mpich")]}
        with tempfile.TemporaryDirectory() as d:
            md = report.write_all(d, meta, recs, [], plots=True)
            for a in ("p2p", "coll"):
                path = os.path.join(d, "area_%s.png" % a)
                self.assertTrue(os.path.exists(path), a)
                self.assertLess(os.path.getsize(path), 100 * 1024)
                self.assertIn("![area %s](area_%s.png)" % (a, a), md)
            # the oversubscribed area has no comparison at all: no plot
            self.assertFalse(os.path.exists(os.path.join(d, "area_oversub.png")))

    def test_geomean(self):
        self.assertAlmostEqual(analysis.geomean([1.0, 4.0]), 2.0)
        self.assertIsNone(analysis.geomean([None, 0]))

    def test_report_has_the_area_summary(self):
        rows_recs = [rec("baton", "pingpong", 8, 1.0), rec("mpich", "pingpong", 8, 2.0)]
        meta = {"date": "d", "mode": "quick", "rounds": 1, "ranks": 2, "machine": {"cpus": 2},
                "calibration_us": {},
                "mpis": [{"name": "baton", "version": "v", "build_error": "", "mpicc": "c", "flags": []},
                         {"name": "mpich", "version": "w", "build_error": "", "mpicc": "c", "flags": []}]}
        with tempfile.TemporaryDirectory() as d:
            md = report.write_all(d, meta, rows_recs, [], plots=False)
        self.assertIn("## By area: baton against the others", md)
        self.assertIn("| point-to-point | 1 | 0 | 0.5 | 0.5 | 0.5 | 0.5 | 0.5 | 1 of 1 |", md)


class Runner(unittest.TestCase):
    def test_mpi_spec(self):
        m = mpis.parse_mpi_spec("x:/opt/bin/mpicc:/opt/bin/mpiexec:-bind-to none")
        self.assertEqual((m.name, m.flags), ("x", ["-bind-to", "none"]))
        self.assertEqual(m.launch(4, ["pingpong"])[:4], ["/opt/bin/mpiexec", "-bind-to", "none", "-n"])
        with self.assertRaises(ValueError):
            mpis.parse_mpi_spec("onlyname")

    def test_jobs_cover_selection(self):
        for mode in ("smoke", "quick", "full"):
            jobs = runner_main.make_jobs(runner_main.ALL_BENCHES, mode, 2, 1.0)
            benches = {b for j in jobs for b in j.benches}
            for b in runner_main.ALL_BENCHES:
                if b not in ("oversub", "limits"):
                    self.assertIn(b, benches, (mode, b))
            self.assertTrue(all(j.timeout > 0 for j in jobs))
        jobs = runner_main.make_jobs(["pingpong"], "quick", 2, 1.0)
        self.assertEqual(len(jobs), 1)
        self.assertEqual(jobs[0].args[0], "pingpong")

    def test_rerender_writes_the_report_again(self):
        recs = [rec("baton", "pingpong", 8, 1.0), rec("mpich", "pingpong", 8, 2.0)]
        meta = {"date": "d", "mode": "quick", "rounds": 1, "ranks": 2, "machine": {"cpus": 2},
                "calibration_us": {1: 0.03},
                "mpis": [{"name": "baton", "version": "v", "build_error": "", "mpicc": "c", "flags": []},
                         {"name": "mpich", "version": "w", "build_error": "", "mpicc": "c", "flags": []}]}
        with tempfile.TemporaryDirectory() as d:
            report.write_all(d, meta, recs, [], plots=False)
            os.remove(os.path.join(d, "report.md"))
            self.assertEqual(runner_main.rerender(d, plots=False), 0)
            with open(os.path.join(d, "report.md")) as f:
                self.assertIn("## By area", f.read())
            self.assertEqual(runner_main.rerender(os.path.join(d, "missing"), plots=False), 2)

    def test_run_cmd_timeout_and_failure(self):
        rc, to, out, err, dt = runner_main.run_cmd(["sh", "-c", "echo '{\"bench\":\"x\"}'; sleep 30"], 1)
        self.assertTrue(to)
        self.assertLess(dt, 10)
        st, why, recs = analysis.classify_run(rc, to, 1, out, err)
        self.assertEqual(st, "failed")
        rc, to, out, err, dt = runner_main.run_cmd(["/nonexistent/binary"], 5)
        self.assertEqual(rc, 127)

    def test_report_with_failures_and_no_plots(self):
        recs = [rec("mpich", "pingpong", 8, 1.0), rec("openmpi", "pingpong", 8, 2.0),
                rec("mpich", "pingpong", 1024, 3.0)]
        runs = [{"mpi": "openmpi", "job": "spawn_rate", "ranks": 2, "round": 1, "status": "failed",
                 "reason": "timed out after 15s", "benches": ["spawn_rate"]}]
        meta = {"date": "d", "mode": "quick", "rounds": 1, "ranks": 2, "machine": {}, "calibration_us": {1: 0.03},
                "mpis": [{"name": "mpich", "version": "v", "build_error": "", "mpicc": "c", "flags": []},
                         {"name": "openmpi", "version": "w", "build_error": "", "mpicc": "c", "flags": []}]}
        with tempfile.TemporaryDirectory() as d:
            md = report.write_all(d, meta, recs, runs, plots=False)
            self.assertIn("timed out after 15s", md)
            self.assertIn("| 2 | 8 B | 1 | 2 | 0.5 | 2 |", md)
            self.assertIn("failed", md)  # openmpi has no 1 KiB result
            with open(os.path.join(d, "raw.jsonl")) as f:
                self.assertEqual(len([json.loads(l) for l in f]), 3)
            self.assertTrue(os.path.exists(os.path.join(d, "results.csv")))


if __name__ == "__main__":
    unittest.main()
