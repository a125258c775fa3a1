"""Runner support of the derived-datatype benchmarks: python3 -m pytest bench/tests"""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runner import analysis, main as runner_main, report  # noqa: E402


def row(mpi, bench, size, med, ranks=2):
    return {"mpi": mpi, "bench": bench, "size": size, "ranks": ranks, "round": 1, "min_us": med,
            "median_us": med, "mbps": size / med}


DDT = ["ddt_contig", "ddt_vector", "ddt_vector_vv", "ddt_struct"]


class Jobs(unittest.TestCase):
    def test_group_and_default_set(self):
        self.assertEqual(runner_main.GROUPS["ddt"], DDT)
        for b in DDT:
            self.assertIn(b, runner_main.ALL_BENCHES)
        # the default selection (no --bench) is every group
        self.assertIn("ddt", list(runner_main.GROUPS))

    def test_one_two_rank_job_with_sizes_per_mode(self):
        K, M = 1024, 1024 * 1024
        for mode, lo, hi, most in (("smoke", 128, 8 * K, 2), ("quick", 512, 4 * M, 4), ("full", 128, 4 * M, 20)):
            jobs = [j for j in runner_main.make_jobs(DDT, mode, 8, 1.0)]
            self.assertEqual(len(jobs), 1, mode)
            j = jobs[0]
            self.assertEqual((j.name, j.ranks, j.benches, j.expect), ("ddt", 2, DDT, DDT))
            self.assertEqual(j.args[0], ",".join(DDT))
            sizes = [int(x) for x in j.args[j.args.index("--sizes") + 1].split(",")]
            self.assertEqual((min(sizes), max(sizes)), (lo, hi), mode)
            self.assertLessEqual(len(sizes), most, mode)
            # every benchmark gets a size in its range: column <= 8 KiB, struct >= 1 KiB
            self.assertTrue(any(s <= 8 * K for s in sizes))
            self.assertTrue(any(s >= K for s in sizes))
            if mode == "full":
                for s in (128, 512, 2 * K, 8 * K):  # N = 16, 64, 256, 1024
                    self.assertIn(s, sizes)
            else:
                self.assertIn("--" + mode, j.args)

    def test_subset(self):
        jobs = runner_main.make_jobs(["ddt_struct", "pingpong"], "quick", 2, 1.0)
        ddt = [j for j in jobs if j.name == "ddt"]
        self.assertEqual(ddt[0].benches, ["ddt_struct"])
        self.assertEqual(ddt[0].args[0], "ddt_struct")


class Ratios(unittest.TestCase):
    def test_ratio_to_contiguous_same_mpi_size_ranks(self):
        rows = [row("a", "ddt_contig", 8192, 2.0), row("a", "ddt_vector", 8192, 5.0),
                row("a", "ddt_vector_vv", 8192, 6.0), row("b", "ddt_contig", 8192, 4.0),
                row("b", "ddt_vector", 8192, 5.0),
                row("a", "ddt_struct", 1 << 20, 150.0), row("a", "ddt_contig", 1 << 20, 100.0),
                row("a", "ddt_struct", 4096, 9.0),             # no reference at this size
                row("a", "ddt_vector", 8192, 1.0, ranks=4),   # no reference with 4 ranks
                row("a", "pingpong", 8192, 1.0)]
        r = analysis.ddt_ratios(rows)
        got = {(x["mpi"], x["bench"], x["size"]): x["ratio"] for x in r}
        self.assertEqual(got, {("a", "ddt_vector", 8192): 2.5, ("b", "ddt_vector", 8192): 1.25,
                               ("a", "ddt_vector_vv", 8192): 3.0, ("a", "ddt_struct", 1 << 20): 1.5})
        self.assertEqual([x["bench"] for x in r], ["ddt_vector", "ddt_vector", "ddt_vector_vv", "ddt_struct"])
        self.assertEqual(r[0]["contig_us"], 2.0)

    def test_empty(self):
        self.assertEqual(analysis.ddt_ratios([row("a", "pingpong", 8, 1.0)]), [])


class Report(unittest.TestCase):
    def test_tables_and_ratio_section(self):
        recs = [row("mpich", "ddt_contig", 8192, 2.0), row("openmpi", "ddt_contig", 8192, 1.0),
                row("mpich", "ddt_vector", 8192, 3.0), row("openmpi", "ddt_vector", 8192, 4.0),
                row("mpich", "ddt_struct", 1 << 22, 800.0), row("mpich", "ddt_contig", 1 << 22, 400.0)]
        meta = {"date": "d", "mode": "quick", "rounds": 1, "ranks": 2, "machine": {}, "calibration_us": {},
                "mpis": [{"name": "mpich", "version": "v", "build_error": "", "mpicc": "c", "flags": []},
                         {"name": "openmpi", "version": "w", "build_error": "", "mpicc": "c", "flags": []}]}
        with tempfile.TemporaryDirectory() as d:
            md = report.write_all(d, meta, recs, [], plots=False)
        for b in DDT[:2] + ["ddt_struct"]:
            self.assertIn("## %s\n" % b, md)
        self.assertIn("## Derived datatypes: non-contiguous / contiguous", md)
        self.assertIn("| bench | size | mpich ratio | openmpi ratio |", md)
        self.assertIn("| ddt_vector | 8 KiB | 1.5 | 4 |", md)
        self.assertIn("| ddt_struct | 4 MiB | 2 | – |", md)
        # bandwidth columns in the per-benchmark tables
        self.assertIn("mpich MB/s", md.split("## ddt_vector\n")[1].split("##")[0])

    def test_plots(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("no matplotlib")
        recs = [row(m, b, s, t * (1 + DDT.index(b))) for m in ("x", "y") for b in DDT
                for s, t in ((1024, 1.0), (8192, 3.0))]
        meta = {"date": "d", "mode": "quick", "rounds": 1, "ranks": 2, "machine": {}, "calibration_us": {},
                "mpis": [{"name": m, "version": "v", "build_error": "", "mpicc": "c", "flags": []}
                         for m in ("x", "y")]}
        with tempfile.TemporaryDirectory() as d:
            md = report.write_all(d, meta, recs, [], plots=True)
            for b in DDT + ["ddt_ratio"]:
                self.assertTrue(os.path.exists(os.path.join(d, b + ".png")), b)
        self.assertIn("![ddt_ratio](ddt_ratio.png)", md)


if __name__ == "__main__":
    unittest.main()
