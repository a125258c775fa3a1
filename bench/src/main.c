/* Baton benchmark suite: one MPI binary, benchmarks chosen on the command
 * line:  mpibench NAME[,NAME...] [options]   (see docs/PERFORMANCE.md) */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *usage =
    "usage: mpibench BENCH[,BENCH...] [--quick|--smoke] [--sizes a,b,..] [--budget s]\n"
    "  p2p: pingpong bw bibw mbw_mr token\n"
    "  collectives: barrier bcast reduce allreduce gather scatter allgather alltoall\n"
    "               alltoallv reduce_scatter\n"
    "  topologies: star ring chaos\n"
    "  overlap: overlap_fixed overlap_daxpy overlap_sender overlap_receiver overlap_ibarrier\n"
    "           overlap_iallreduce\n"
    "  spawn: spawn_latency spawn_rate spawn_pingpong      kernel: is\n"
    "  datatypes: ddt_contig ddt_vector ddt_vector_vv ddt_struct\n"
    "  one-sided: rma_{put,get}_{lat,bw}_{flush,lock,fence,pscw,create} rma_acc_lat\n"
    "             rma_fop_lat rma_cas_lat rma_fop_contended rma_cas_contended rma_halo\n"
    "environment: BENCH_THREAD_MULTIPLE=1 initializes with MPI_Init_thread(MPI_THREAD_MULTIPLE)\n"
    "  (an MPI's own progress thread may need it, e.g. MPICH's MPIR_CVAR_ASYNC_PROGRESS=1)\n";

int main(int argc, char **argv)
{
    /* MPI_Init unless asked otherwise: the level requested can change the
     * MPI's hot paths (locks), and the rows are compared at MPI_Init's. */
    const char *tm = getenv("BENCH_THREAD_MULTIPLE");
    int want_multiple = tm && *tm && strcmp(tm, "0") != 0;
    int provided = MPI_THREAD_SINGLE;
    if (want_multiple)
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    else
        MPI_Init(&argc, &argv);
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL)
        return spawn_child(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (want_multiple && provided < MPI_THREAD_MULTIPLE && g_rank == 0)
        fprintf(stderr, "mpibench: BENCH_THREAD_MULTIPLE: MPI_THREAD_MULTIPLE requested, level %d provided\n",
                provided);
    if (argc < 2) {
        if (g_rank == 0)
            fputs(usage, stderr);
        MPI_Finalize();
        return 2;
    }
    if (!strcmp(argv[1], "version")) {
        char v[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0, maj = 0, min = 0;
        MPI_Get_library_version(v, &len);
        MPI_Get_version(&maj, &min);
        v[len] = 0;
        for (char *p = v; *p; p++)
            if (*p == '"' || *p == '\\' || *p == '\n' || *p == '\t' || (unsigned char)*p < 32)
                *p = ' ';
        if (g_rank == 0)
            printf("{\"version\":\"%.200s\",\"standard\":\"%d.%d\",\"ranks\":%d,\"thread_multiple\":%s}\n", v,
                   maj, min, g_size, want_multiple && provided == MPI_THREAD_MULTIPLE ? "true" : "false");
        MPI_Finalize();
        return 0;
    }
    opts_parse(argc, argv, 2);
    char list[1024];
    snprintf(list, sizeof list, "%s", argv[1]);
    int rc = 0;
    char *save = NULL;
    for (char *b = strtok_r(list, ",", &save); b; b = strtok_r(NULL, ",", &save)) {
        int r;
        if (!strcmp(b, "pingpong")) r = bench_pingpong();
        else if (!strcmp(b, "bw")) r = bench_bw();
        else if (!strcmp(b, "bibw")) r = bench_bibw();
        else if (!strcmp(b, "mbw_mr")) r = bench_mbw_mr();
        else if (!strcmp(b, "token")) r = bench_token();
        else if (!strcmp(b, "star") || !strcmp(b, "ring") || !strcmp(b, "chaos")) r = bench_topo(b);
        else if (!strncmp(b, "overlap_", 8)) r = bench_overlap(b);
        else if (!strncmp(b, "spawn_", 6)) r = bench_spawn(b, argv[0]);
        else if (!strcmp(b, "is")) r = bench_is();
        else if (!strncmp(b, "ddt_", 4)) r = bench_ddt(b);
        else if (!strcmp(b, "rma_halo")) r = bench_rma_halo();
        else if (!strncmp(b, "rma_acc_", 8) || !strncmp(b, "rma_fop_", 8) || !strncmp(b, "rma_cas_", 8))
            r = bench_rma_atomic(b);
        else if (!strncmp(b, "rma_", 4)) r = bench_rma(b);
        else r = bench_coll(b);
        if (r) {
            rc = r;
            if (g_rank == 0)
                fprintf(stderr, "mpibench: %s failed (%d)\n", b, r);
        }
    }
    MPI_Finalize();
    return rc;
}
