"""Runner support of the one-sided benchmarks: python3 -m pytest bench/tests"""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runner import analysis, main as runner_main, report  # noqa: E402

K, M = 1024, 1024 * 1024


def sizes_of(job):
    return [int(x) for x in job.args[job.args.index("--sizes") + 1].split(",")]


class Jobs(unittest.TestCase):
    def test_group(self):
        rma = runner_main.GROUPS["rma"]
        self.assertEqual(rma, analysis.RMA_BENCHES)
        self.assertEqual(len(rma), len(set(rma)))
        for b in ("rma_put_lat_flush", "rma_get_lat_pscw", "rma_put_bw_fence", "rma_get_bw_create", "rma_acc_lat",
                  "rma_fop_lat", "rma_cas_lat", "rma_fop_contended", "rma_cas_contended", "rma_halo"):
            self.assertIn(b, rma)
            self.assertIn(b, runner_main.ALL_BENCHES)
        self.assertTrue(all(b.startswith("rma_") for b in rma))

    def test_jobs_per_mode(self):
        for mode in ("smoke", "quick", "full"):
            jobs = {j.name: j for j in runner_main.make_jobs(runner_main.GROUPS["rma"], mode, 6, 1.0)}
            self.assertEqual(sorted(b for j in jobs.values() for b in j.benches), sorted(runner_main.GROUPS["rma"]))
            for j in jobs.values():
                self.assertEqual(j.args[0], ",".join(j.benches))
                self.assertEqual(j.expect, j.benches)
                if mode != "full":
                    self.assertIn("--" + mode, j.args)
            # pairs on two ranks; contention and the halo on all of them
            for name in ("rma_lat", "rma_bw", "rma_atomic", "rma_cas"):
                self.assertEqual(jobs[name].ranks, 2, (mode, name))
            for name in ("rma_fop_contended", "rma_cas_contended", "rma_halo"):
                self.assertEqual(jobs[name].ranks, 6, (mode, name))
            # a compare-and-swap that crashes an MPI takes no other row with it
            self.assertEqual(jobs["rma_cas"].benches, ["rma_cas_lat"])
            self.assertEqual(jobs["rma_cas_contended"].benches, ["rma_cas_contended"])
            self.assertIn(8, sizes_of(jobs["rma_lat"]))
            if mode == "quick":
                self.assertEqual(sizes_of(jobs["rma_lat"]), [8])
                self.assertEqual(sizes_of(jobs["rma_bw"]), [M])
            if mode == "full":
                bw = sizes_of(jobs["rma_bw"])
                self.assertIn(M, bw)
                self.assertGreater(len(bw), 8)
                self.assertNotIn("--quick", jobs["rma_bw"].args)

    def test_subset_and_at_least_two_ranks(self):
        jobs = runner_main.make_jobs(["rma_get_bw_pscw", "rma_halo", "pingpong"], "quick", 1, 1.0)
        by = {j.name: j for j in jobs}
        self.assertEqual(by["rma_bw"].benches, ["rma_get_bw_pscw"])
        self.assertEqual(by["rma_halo"].ranks, 2)
        self.assertNotIn("rma_lat", by)


class Report(unittest.TestCase):
    def rec(self, mpi, bench, size, med, ranks=2, **kw):
        r = {"mpi": mpi, "bench": bench, "size": size, "ranks": ranks, "round": 1, "min_us": med,
             "median_us": med, "mbps": size / med}
        r.update(kw)
        return r

    def test_area_tables_and_failed_mpi(self):
        self.assertEqual(analysis.area_of("rma_put_lat_flush", 2, 2), "rma")
        self.assertEqual(analysis.area_of("rma_halo", 8, 2), "rma")
        recs = [self.rec("mpich", "rma_put_lat_flush", 8, 2.0), self.rec("openmpi", "rma_put_lat_flush", 8, 1.0),
                self.rec("mpich", "rma_put_bw_fence", M, 100.0, window=16),
                self.rec("openmpi", "rma_put_bw_fence", M, 50.0, window=16),
                self.rec("mpich", "rma_fop_contended", 8, 0.5, ranks=4, ops_per_s=8e6, success_share=1.0),
                self.rec("openmpi", "rma_fop_contended", 8, 1.0, ranks=4, ops_per_s=4e6, success_share=1.0)]
        runs = [{"mpi": "baton", "job": "rma_lat", "ranks": 2, "round": 1, "status": "failed",
                 "reason": "exit code 1: rank 0: MPI_Win_allocate of 64 bytes failed: unsupported",
                 "benches": ["rma_put_lat_flush"]}]
        meta = {"date": "d", "mode": "quick", "rounds": 1, "ranks": 4, "machine": {"cpus": 2}, "calibration_us": {},
                "mpis": [{"name": n, "version": "v", "build_error": "", "mpicc": "c", "flags": []}
                         for n in ("baton", "mpich", "openmpi")]}
        with tempfile.TemporaryDirectory() as d:
            md = report.write_all(d, meta, recs, runs, plots=False)
            with open(os.path.join(d, "results.csv")) as f:
                csv_text = f.read()
        self.assertIn("MPI_Win_allocate of 64 bytes failed", md)
        self.assertIn("## rma_put_lat_flush\n", md)
        self.assertIn("| 2 | 8 B | 2 | 1 | 2 | 0.5 |", md)
        bw = md.split("## rma_put_bw_fence\n")[1].split("##")[0]
        self.assertIn("mpich MB/s", bw)
        fop = md.split("## rma_fop_contended\n")[1].split("##")[0]
        self.assertIn("mpich ops_per_s", fop)
        self.assertIn("| 4 | 8 B | 0.5 | 1 | 8000000 | 4000000 |", fop)
        self.assertIn("ops_per_s", csv_text.splitlines()[0])


if __name__ == "__main__":
    unittest.main()
