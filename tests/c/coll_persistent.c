/* ranks: 1 2 3 4 5 8 */
/* timeout: 120 */
/* Persistent collectives (MPI-4) together, beyond what the per-collective
   tests do with one request at a time:
   A. one MPI_Startall over persistent collectives on three communicators
      (Allreduce_init on MPI_COMM_WORLD, Bcast_init on a duplicate,
      Allgatherv_init on a split) and persistent point-to-point requests
      (Send_init/Recv_init around a ring), restarted 12 times with new data
      and completed with Waitall, a Testall loop, a Waitsome loop or a
      Waitany loop; then MPI_Request_free;
   B. five persistent collectives on one communicator (Reduce, Scan,
      Alltoall, Barrier, Gatherv), started one by one in the same order on
      every rank with a blocking Allreduce on the same communicator in
      between, completed by MPI_Waitall in reverse order, 6 times;
   C. a request freed without ever being started, an info object with
      hints passed to the init call, MPI_Request_get_status polling on an
      active request (which stays allocated), MPI_Test and MPI_Wait on an
      inactive request (flag true, empty status), a communicator freed after
      its persistent request;
   D. 60 restarts of one persistent Allreduce with in-place data.
   Results are checked against values computed from rank numbers. Without
   MPI-4 (Open MPI 4.1) the test prints SKIP.

   Compiling with -DSKIP_MPICH_402_BUGS completes the requests of part A
   with MPI_Waitall or with MPI_Test/MPI_Wait on each request: MPICH 4.0.2
   mishandles persistent collective requests in the other multiple-completion
   calls (MPI_Testall fails with MPI_ERR_IN_STATUS, MPI_Waitsome counts too
   many, and after MPI_Waitany/MPI_Testany/MPI_Waitsome the requests still
   count as active, so the next MPI_Startall fails). */
#include "coll_util.h"
#include "coll_payload.h"

#if CU_MPI4

static int rv(int r, int j, int it)
{
    return (r * 5 + j * 3 + it * 7) % 41 - 20;
}

static void check_ints(const char *what, const int *got, const int *exp, int n)
{
    for (int j = 0; j < n; j++)
        if (got[j] != exp[j]) {
            char s1[128], s2[128];
            CU_FAIL("%s: int %d: expected %s, got %s", what, j, cu_vstr(exp[j], s1, sizeof s1),
                    cu_vstr(got[j], s2, sizeof s2));
            return;
        }
}

/* complete n requests in a way chosen by `way` (0 MPI_Waitall, 1 a
   MPI_Testall loop, 2 a MPI_Waitsome loop, 3 a MPI_Waitany loop; with
   -DSKIP_MPICH_402_BUGS ways 1 to 3 use MPI_Test/MPI_Wait on each request) */
static void complete(MPI_Request *r, int n, int way)
{
    int left = n, flag = 0, out = 0, idx = 0, idxs[16], done[16] = {0};
    double t0 = cu_now();
    way %= 4;
    if (way == 0) {
        cu_ok(MPI_Waitall(n, r, MPI_STATUSES_IGNORE), "MPI_Waitall");
        return;
    }
    if (MPICH_BUG(1)) {
        while (left > 0 && cu_now() - t0 < 60)
            for (int k = 0; k < n; k++) {
                int q = way == 2 ? n - 1 - k : k, f = 1;
                if (done[q])
                    continue;
                if (way == 1 ? !cu_ok(MPI_Test(&r[q], &f, MPI_STATUS_IGNORE), "MPI_Test")
                             : !cu_ok(MPI_Wait(&r[q], MPI_STATUS_IGNORE), "MPI_Wait"))
                    return;
                done[q] = f;
                left -= f;
            }
    } else if (way == 1) {
        while (!flag && cu_now() - t0 < 60)
            if (!cu_ok(MPI_Testall(n, r, &flag, MPI_STATUSES_IGNORE), "MPI_Testall"))
                return;
        if (flag)
            left = 0;
    } else if (way == 2) {
        while (left > 0) {
            if (!cu_ok(MPI_Waitsome(n, r, &out, idxs, MPI_STATUSES_IGNORE), "MPI_Waitsome") ||
                out == MPI_UNDEFINED)
                break;
            left -= out;
        }
    } else {
        while (left > 0) {
            if (!cu_ok(MPI_Waitany(n, r, &idx, MPI_STATUS_IGNORE), "MPI_Waitany") ||
                idx == MPI_UNDEFINED)
                break;
            left--;
        }
    }
    if (left != 0)
        CU_FAIL("completion loop (way %d) ended with %d request(s) not reported complete", way,
                left);
}

/* ---- A: Startall across communicators and point-to-point ---- */
static void part_a(MPI_Comm dup, MPI_Comm split)
{
    int wr = cu_wrank, ws = cu_wsize, dr, ds, sr, ss;
    MPI_Comm_rank(dup, &dr);
    MPI_Comm_size(dup, &ds);
    MPI_Comm_rank(split, &sr);
    MPI_Comm_size(split, &ss);
    enum { N = 9 };
    int ar_s[N], ar_r[N], bc[N], ag_s[N], ag_r[N * 64], ag_cnt[64], ag_dsp[64], p_s[N], p_r[N];
    int off = 0;
    for (int i = ss - 1; i >= 0; i--) {
        ag_cnt[i] = 1 + i % 3;
        ag_dsp[i] = off;
        off += ag_cnt[i];
    }
    int broot = ds - 1;
    MPI_Request r[5];
    cu_coll = "Startall";
    cu_mode = CU_PERSISTENT;
    snprintf(cu_desc, sizeof cu_desc, "A: Allreduce/Bcast/Allgatherv/Send/Recv in one Startall");
    cu_iter = 0;
    int ok = cu_ok(MPI_Allreduce_init(ar_s, ar_r, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD,
                                      MPI_INFO_NULL, &r[0]),
                   "MPI_Allreduce_init");
    ok = cu_ok(MPI_Bcast_init(bc, N, MPI_INT, broot, dup, MPI_INFO_NULL, &r[1]),
               "MPI_Bcast_init") && ok;
    ok = cu_ok(MPI_Allgatherv_init(ag_s, ag_cnt[sr], MPI_INT, ag_r, ag_cnt, ag_dsp, MPI_INT, split,
                                   MPI_INFO_NULL, &r[2]),
               "MPI_Allgatherv_init") && ok;
    CHECK_MPI(MPI_Send_init(p_s, N, MPI_INT, (wr + 1) % ws, 77, MPI_COMM_WORLD, &r[3]));
    CHECK_MPI(MPI_Recv_init(p_r, N, MPI_INT, (wr + ws - 1) % ws, 77, MPI_COMM_WORLD, &r[4]));
    if (!ok)
        return; /* reported; the requests that exist are leaked */
    for (int it = 0; it < 12; it++) {
        cu_iter = it;
        for (int j = 0; j < N; j++) {
            ar_s[j] = rv(wr, j, it);
            ar_r[j] = CU_SENT;
            bc[j] = dr == broot ? cu_val(broot, 1, j, it) : CU_SENT;
            ag_s[j] = cu_val(sr, 2, j, it);
            p_s[j] = cu_val(wr, 3, j, it);
            p_r[j] = CU_SENT;
        }
        for (int k = 0; k < off; k++)
            ag_r[k] = CU_SENT;
        if (!cu_ok(MPI_Startall(5, r), "MPI_Startall"))
            return;
        complete(r, 5, it + wr);
        for (int k = 0; k < 5; k++)
            if (r[k] == MPI_REQUEST_NULL) {
                CU_FAIL("persistent request %d became MPI_REQUEST_NULL", k);
                return;
            }
        int exp[N * 64];
        for (int j = 0; j < N; j++) {
            exp[j] = 0;
            for (int q = 0; q < ws; q++)
                exp[j] += rv(q, j, it);
        }
        check_ints("Allreduce_init on WORLD", ar_r, exp, N);
        for (int j = 0; j < N; j++)
            exp[j] = cu_val(broot, 1, j, it);
        check_ints("Bcast_init on dup(WORLD)", bc, exp, N);
        for (int i = 0; i < ss; i++)
            for (int j = 0; j < ag_cnt[i]; j++)
                exp[ag_dsp[i] + j] = cu_val(i, 2, j, it);
        check_ints("Allgatherv_init on the split communicator", ag_r, exp, off);
        for (int j = 0; j < N; j++)
            exp[j] = cu_val((wr + ws - 1) % ws, 3, j, it);
        check_ints("Recv_init from the left neighbour", p_r, exp, N);
        cu_execs += 3;
    }
    for (int k = 0; k < 5; k++)
        cu_ok(MPI_Request_free(&r[k]), "MPI_Request_free");
}

/* ---- B: several persistent collectives on one communicator ---- */
static void part_b(void)
{
    int rank = cu_rank, size = cu_size;
    enum { N = 6 };
    int rd_s[N], rd_r[N], sc_s[N], sc_r[N], a2_s[N * 64], a2_r[N * 64], gv_s[N], gv_r[N * 64];
    int gcnt[64], gdsp[64], off = 0;
    for (int i = 0; i < size; i++) {
        gcnt[i] = i % 2 ? 0 : 2 + i % 4; /* ranks with odd numbers send nothing */
        gdsp[i] = off + 1;
        off += gcnt[i] + 1;
    }
    int root = size / 2, groot = size - 1;
    MPI_Request r[5];
    cu_coll = "several persistent collectives";
    cu_mode = CU_PERSISTENT;
    snprintf(cu_desc, sizeof cu_desc,
             "B: Reduce, Scan, Alltoall, Barrier, Gatherv on %s, started in order", cu_cname);
    cu_iter = 0;
    int ok = cu_ok(MPI_Reduce_init(rd_s, rank == root ? rd_r : NULL, N, MPI_INT, MPI_SUM, root,
                                   cu_comm, MPI_INFO_NULL, &r[0]),
                   "MPI_Reduce_init");
    ok = cu_ok(MPI_Scan_init(sc_s, sc_r, N, MPI_INT, MPI_SUM, cu_comm, MPI_INFO_NULL, &r[1]),
               "MPI_Scan_init") && ok;
    ok = cu_ok(MPI_Alltoall_init(a2_s, N, MPI_INT, a2_r, N, MPI_INT, cu_comm, MPI_INFO_NULL,
                                 &r[2]),
               "MPI_Alltoall_init") && ok;
    ok = cu_ok(MPI_Barrier_init(cu_comm, MPI_INFO_NULL, &r[3]), "MPI_Barrier_init") && ok;
    ok = cu_ok(MPI_Gatherv_init(gv_s, gcnt[rank], MPI_INT, rank == groot ? gv_r : NULL, gcnt, gdsp,
                                MPI_INT, groot, cu_comm, MPI_INFO_NULL, &r[4]),
               "MPI_Gatherv_init") && ok;
    if (!ok)
        return;
    for (int it = 0; it < 6; it++) {
        cu_iter = it;
        for (int j = 0; j < N; j++) {
            rd_s[j] = rv(rank, j, it);
            rd_r[j] = CU_SENT;
            sc_s[j] = rv(rank, j + 1, it);
            sc_r[j] = CU_SENT;
            gv_s[j] = cu_val(rank, 4, j, it);
        }
        for (int d = 0; d < size; d++)
            for (int j = 0; j < N; j++) {
                a2_s[d * N + j] = cu_val(rank, d, j, it);
                a2_r[d * N + j] = CU_SENT;
            }
        for (int k = 0; k < off + 1; k++)
            gv_r[k] = CU_SENT;
        int x = rank + it, sum = 0;
        for (int k = 0; k < 5; k++) {
            if (!cu_ok(MPI_Start(&r[k]), "MPI_Start"))
                return;
            if (k == 2) /* a blocking collective between the starts */
                cu_ok(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, cu_comm), "MPI_Allreduce");
        }
        MPI_Request rev[5];
        for (int k = 0; k < 5; k++)
            rev[k] = r[4 - k];
        cu_ok(MPI_Waitall(5, rev, MPI_STATUSES_IGNORE), "MPI_Waitall");
        int esum = 0;
        for (int q = 0; q < size; q++)
            esum += q + it;
        if (sum != esum)
            CU_FAIL("blocking Allreduce between the starts gave %d, expected %d", sum, esum);
        int exp[N * 64];
        if (rank == root) {
            for (int j = 0; j < N; j++) {
                exp[j] = 0;
                for (int q = 0; q < size; q++)
                    exp[j] += rv(q, j, it);
            }
            check_ints("Reduce_init result", rd_r, exp, N);
        }
        for (int j = 0; j < N; j++) {
            exp[j] = 0;
            for (int q = 0; q <= rank; q++)
                exp[j] += rv(q, j + 1, it);
        }
        check_ints("Scan_init result", sc_r, exp, N);
        for (int s = 0; s < size; s++)
            for (int j = 0; j < N; j++)
                exp[s * N + j] = cu_val(s, rank, j, it);
        check_ints("Alltoall_init result", a2_r, exp, N * size);
        if (rank == groot) {
            for (int k = 0; k < off + 1; k++)
                exp[k] = CU_SENT;
            for (int i = 0; i < size; i++)
                for (int j = 0; j < gcnt[i]; j++)
                    exp[gdsp[i] + j] = cu_val(i, 4, j, it);
            check_ints("Gatherv_init result (gaps must stay untouched)", gv_r, exp, off + 1);
        }
        cu_execs += 5;
    }
    for (int k = 0; k < 5; k++)
        cu_ok(MPI_Request_free(&r[k]), "MPI_Request_free");
}

/* ---- C: request life cycle ---- */
static void part_c(void)
{
    cu_coll = "persistent request life cycle";
    cu_mode = CU_PERSISTENT;
    cu_iter = 0;
    int buf[4] = {0, 0, 0, 0}, res[4];
    MPI_Request r;

    snprintf(cu_desc, sizeof cu_desc, "C: freed without a start");
    if (cu_ok(MPI_Allreduce_init(buf, res, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &r),
              "MPI_Allreduce_init")) {
        cu_ok(MPI_Request_free(&r), "MPI_Request_free");
        if (r != MPI_REQUEST_NULL)
            CU_FAIL("MPI_Request_free left the handle non-null");
    }

    snprintf(cu_desc, sizeof cu_desc, "C: info hints, Request_get_status, inactive Test/Wait");
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "baton_test_unknown_hint", "true");
    MPI_Info_set(info, "mpi_assert_no_any_source", "true");
    MPI_Comm dup;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    int root = cu_wsize - 1;
    if (cu_ok(MPI_Bcast_init(buf, 4, MPI_INT, root, dup, info, &r), "MPI_Bcast_init")) {
        MPI_Info_free(&info); /* the request must not depend on it */
        for (int it = 0; it < 3; it++) {
            cu_iter = it;
            for (int j = 0; j < 4; j++)
                buf[j] = cu_wrank == root ? cu_val(root, 5, j, it) : CU_SENT;
            if (!cu_ok(MPI_Start(&r), "MPI_Start"))
                break;
            int flag = 0;
            MPI_Status st;
            double t0 = cu_now();
            while (!flag && cu_now() - t0 < 60)
                if (!cu_ok(MPI_Request_get_status(r, &flag, &st), "MPI_Request_get_status"))
                    break;
            if (r == MPI_REQUEST_NULL)
                CU_FAIL("MPI_Request_get_status freed the request");
            /* still active for MPI: complete it */
            cu_ok(MPI_Wait(&r, &st), "MPI_Wait");
            for (int j = 0; j < 4; j++)
                if (buf[j] != cu_val(root, 5, j, it)) {
                    char s1[128];
                    CU_FAIL("Bcast_init int %d: got %s", j, cu_vstr(buf[j], s1, sizeof s1));
                    break;
                }
            /* inactive now: Test and Wait return at once with an empty status */
            st.MPI_SOURCE = 12345;
            st.MPI_TAG = 12345;
            st.MPI_ERROR = 12345;
            flag = 0;
            cu_ok(MPI_Test(&r, &flag, &st), "MPI_Test (inactive)");
            if (!flag)
                CU_FAIL("MPI_Test on an inactive persistent request: flag 0");
            if (st.MPI_SOURCE != MPI_ANY_SOURCE || st.MPI_TAG != MPI_ANY_TAG)
                CU_FAIL("MPI_Test on an inactive request: status source %d tag %d, expected "
                        "MPI_ANY_SOURCE/MPI_ANY_TAG (empty status)",
                        st.MPI_SOURCE, st.MPI_TAG);
            int cnt = -1;
            MPI_Get_count(&st, MPI_INT, &cnt);
            if (cnt != 0)
                CU_FAIL("empty status: MPI_Get_count gives %d, expected 0", cnt);
            cu_ok(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait (inactive)");
            if (r == MPI_REQUEST_NULL)
                CU_FAIL("MPI_Wait on an inactive persistent request freed it");
            cu_execs++;
        }
        cu_ok(MPI_Request_free(&r), "MPI_Request_free");
    } else {
        MPI_Info_free(&info);
    }
    CHECK_MPI(MPI_Comm_free(&dup));
}

/* ---- D: many restarts ---- */
static void part_d(void)
{
    cu_coll = "Allreduce";
    cu_mode = CU_PERSISTENT;
    snprintf(cu_desc, sizeof cu_desc, "D: 60 restarts, MPI_IN_PLACE, 33 ints");
    enum { N = 33 };
    int buf[N];
    MPI_Request r;
    if (!cu_ok(MPI_Allreduce_init(MPI_IN_PLACE, buf, N, MPI_INT, MPI_MAX, cu_comm, MPI_INFO_NULL,
                                  &r),
               "MPI_Allreduce_init"))
        return;
    for (int it = 0; it < 60; it++) {
        cu_iter = it;
        for (int j = 0; j < N; j++)
            buf[j] = rv(cu_rank, j, it);
        if (!cu_ok(MPI_Start(&r), "MPI_Start") || !cu_complete(&r, it))
            break;
        int exp[N];
        for (int j = 0; j < N; j++) {
            exp[j] = rv(0, j, it);
            for (int q = 1; q < cu_size; q++)
                if (rv(q, j, it) > exp[j])
                    exp[j] = rv(q, j, it);
        }
        check_ints("Allreduce_init MAX result", buf, exp, N);
        cu_execs++;
    }
    cu_ok(MPI_Request_free(&r), "MPI_Request_free");
}

int main(int argc, char **argv)
{
    cu_init(&argc, &argv);
    MPI_Comm dup, split;
    const char *sname;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    split = cu_split_comm(&sname);
    part_a(dup, split);
    part_b();
    cu_set_comm(split, sname);
    part_b();
    part_d();
    cu_set_comm(MPI_COMM_WORLD, "WORLD");
    part_c();
    part_d();
    CHECK_MPI(MPI_Comm_free(&dup));
    CHECK_MPI(MPI_Comm_free(&split));
    return cu_finish("coll_persistent");
}

#else

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        printf("SKIP coll_persistent: persistent collectives need MPI 4.0 (MPI_VERSION %d)\n",
               MPI_VERSION);
    MPI_Finalize();
    return 0;
}

#endif
