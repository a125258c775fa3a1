"""Unit tests of the runner's TCP mode (--transport tcp, --hosts, --rsh): python3 -m pytest bench/tests"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runner import mpis, report  # noqa: E402


def three():
    return {"baton": mpis.MPI("baton", "/p/mpicc", "/p/mpiexec"),
            "mpich": mpis.MPI("mpich", "mpicc.mpich", "mpiexec.mpich"),
            "openmpi": mpis.MPI("openmpi", "mpicc.openmpi", "mpiexec.openmpi", ["--oversubscribe"])}


class Transport(unittest.TestCase):
    def test_loopback(self):
        f = mpis.apply_transport(three(), "tcp")
        self.assertEqual(f["baton"].env["BATON_TRANSPORTS"], "tcp")
        self.assertEqual(f["mpich"].env, {"UCX_TLS": "tcp", "UCX_NET_DEVICES": "lo"})
        fl = " ".join(f["openmpi"].flags)
        self.assertIn("--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo", fl)
        self.assertEqual(list(f)[-2:], ["rawtcp", "rawtcp_spin"])
        self.assertEqual(f["rawtcp"].launch(2, ["pingpong", "--quick"]),
                         [f["rawtcp"].binary, "pingpong", "--quick"])

    def test_hosts(self):
        f = mpis.apply_transport(three(), "tcp", ["bh1", "bh2"], "/r/rsh", "eth0", "bh0")
        self.assertEqual(f["baton"].flags[-4:], ["-hosts", "bh1,bh2", "--rsh", "/r/rsh"])
        self.assertEqual(f["mpich"].flags, ["-hosts", "bh1,bh2", "-launcher", "ssh", "-launcher-exec", "/r/rsh",
                                            "-localhost", "bh0"])
        self.assertEqual(f["mpich"].env["UCX_NET_DEVICES"], "eth0")
        fl = " ".join(f["openmpi"].flags)
        self.assertIn("--host bh1,bh2", fl)
        self.assertIn("--bind-to none", fl)
        self.assertIn("plm_rsh_agent /r/rsh", fl)
        cmd = f["rawtcp_spin"].launch(2, ["pingpong", "--smoke"])
        self.assertEqual(cmd[:2], ["sh", "-c"])
        self.assertEqual(cmd[4:], ["/r/rsh", "bh1", "bh2", f["rawtcp"].binary, "47177", "pingpong", "--smoke"])

    def test_hosts_without_rsh(self):
        with self.assertRaises(ValueError):
            mpis.apply_transport(three(), "tcp", ["bh1", "bh2"])

    def test_rawtcp_runs_only_its_benchmarks(self):
        r = mpis.RawTCP(spin=True)
        self.assertEqual(r.adapt(["pingpong", "bw", "bibw"], ["pingpong,bw,bibw", "--quick"]),
                         (["pingpong", "bw"], ["pingpong,bw", "--quick", "--spin"]))
        self.assertIsNone(r.adapt(["allreduce"], ["allreduce"]))


class RatioToReference(unittest.TestCase):
    def test_table_against_rawtcp(self):
        rows = [{"mpi": m, "bench": "pingpong", "size": s, "ranks": 2, "median_us": t, "min_us": t, "mbps": 0}
                for m, s, t in (("mpich", 8, 20.0), ("rawtcp", 8, 10.0), ("mpich", 0, 5.0))]
        meta = {"date": "d", "mode": "quick", "rounds": 1, "ranks": 2, "machine": {}, "reference": "rawtcp",
                "transport": "tcp", "hosts": [], "calibration_factors": {},
                "mpis": [{"name": "mpich", "version": "v", "build_error": "", "mpicc": "", "flags": [],
                          "env": {"UCX_TLS": "tcp"}},
                         {"name": "rawtcp", "version": "raw", "build_error": "", "mpicc": "", "flags": []}]}
        md = report.markdown(meta, rows, [], [], ["mpich", "rawtcp"], [])
        self.assertIn("| ranks | size | mpich us | rawtcp us | mpich / rawtcp |", md)
        self.assertIn("| 2 | 8 B | 20 | 10 | 2 |", md)
        self.assertIn("| 2 | 0 B | 5 | n/a | – |", md)
        self.assertIn("`UCX_TLS=tcp`", md)


if __name__ == "__main__":
    unittest.main()
