"""mpi4py on Baton: run under mpiexec with 2-4 ranks. Checks pickled-object and buffer
point-to-point, reductions, gathers (which use the MPI_Count `_c` collectives), a split
communicator and the thread level mpi4py asks for (MPI_THREAD_MULTIPLE)."""
import array

from mpi4py import MPI

comm = MPI.COMM_WORLD
r, n = comm.Get_rank(), comm.Get_size()
assert MPI.Query_thread() == MPI.THREAD_MULTIPLE
assert "Baton" in MPI.Get_library_version()

data = comm.sendrecv({"from": r, "list": list(range(5))}, dest=(r + 1) % n, source=(r - 1) % n)
assert data == {"from": (r - 1) % n, "list": [0, 1, 2, 3, 4]}, data
assert comm.allreduce(r, op=MPI.SUM) == n * (n - 1) // 2

buf, out = array.array("d", [r] * 4), array.array("d", [0] * 4)
comm.Allreduce(buf, out, op=MPI.MAX)
assert list(out) == [n - 1.0] * 4, out

g = comm.gather(r * r, root=0)
assert g == ([i * i for i in range(n)] if r == 0 else None), g
assert comm.allgather(str(r)) == [str(i) for i in range(n)]
assert comm.bcast("hello" if r == 0 else None, root=0) == "hello"

sub = comm.Split(r % 2, -r)
assert sub.Get_size() == len(range(r % 2, n, 2))
assert sub.allreduce(1) == sub.Get_size()
sub.Free()

req = comm.isend(r, dest=(r + 1) % n, tag=7)
assert comm.recv(source=(r - 1) % n, tag=7) == (r - 1) % n
req.wait()
comm.Barrier()
if r == 0:
    print("PASS mpi4py smoke on %d ranks" % n)
