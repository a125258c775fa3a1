/* ranks: 4 */
/* env: BATON_COLL_ALLREDUCE=rabenseifner */
/* env: BATON_COLL_BCAST=shm */
/* env: BATON_COLL_FALLBACK=error */
/* A forced collective algorithm that cannot serve a call fails it under
   BATON_COLL_FALLBACK=error, with a message naming the variable, the
   algorithm and why, instead of running another algorithm unnoticed (which
   would let a test of that algorithm pass without running it):
   - Rabenseifner's allreduce needs a commutative operation and at least one
     element per process: MPI_SUM on 8 ints runs it; a non-commutative user
     operation, or 1 int on 4 processes, is refused;
   - the shared-memory bcast needs the communicator's area and a message that
     fits it: 1 int on MPI_COMM_WORLD runs it; 64 KiB, or an MPI_Ibcast on a
     new communicator (which gets its area at its first blocking collective),
     is refused (on a world across hosts, which has no area, every shared-memory bcast is).
   Every process decides alike, so a refused call fails everywhere and the
   calls after it still match. Baton only: other MPIs print SKIP. */
#include "check.h"

static int rank, size;

/* out[i] = in[i] * 2 + out[i]: associative, not commutative. */
static void affine(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] = a[i] * 2 + b[i];
}

/* `rc` is an error whose message names BATON_COLL_FALLBACK and `algo`. */
static void refused(int rc, const char *what, const char *algo)
{
    char s[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    CHECK(rc != MPI_SUCCESS, "%s: succeeded where BATON_COLL_FALLBACK=error must refuse it", what);
    if (rc == MPI_SUCCESS)
        return;
    MPI_Error_string(rc, s, &len);
    CHECK(strstr(s, "BATON_COLL_FALLBACK") && strstr(s, algo), "%s: error '%s' does not name the fallback and %s",
          what, s, algo);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int vlen = 0;
    MPI_Get_library_version(ver, &vlen);
    if (!strstr(ver, "Baton")) {
        printf("SKIP coll_fallback: BATON_COLL_FALLBACK is Baton's\n");
        MPI_Finalize();
        return 0;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* Rabenseifner serves a commutative sum of 8 ints on 4 processes. */
    int in[8], out[8];
    for (int i = 0; i < 8; i++)
        in[i] = rank * 10 + i;
    CHECK_MPI(MPI_Allreduce(in, out, 8, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    for (int i = 0; i < 8; i++)
        CHECK(out[i] == 10 * size * (size - 1) / 2 + size * i, "allreduce sum [%d] = %d", i, out[i]);

    MPI_Op op;
    MPI_Op_create(affine, 0, &op);
    refused(MPI_Allreduce(in, out, 8, MPI_INT, op, MPI_COMM_WORLD), "allreduce, non-commutative op", "rabenseifner");
    MPI_Request req = MPI_REQUEST_NULL;
    refused(MPI_Iallreduce(in, out, 8, MPI_INT, op, MPI_COMM_WORLD, &req), "iallreduce, non-commutative op",
            "rabenseifner");
    CHECK(req == MPI_REQUEST_NULL, "a refused MPI_Iallreduce wrote a request");
    MPI_Op_free(&op);
    refused(MPI_Allreduce(in, out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "allreduce, 1 element on 4 processes",
            "rabenseifner");

    /* The shared-memory bcast serves a small message on the world, when the world is on one
       host (across hosts no communicator spanning them has an area, and every call is refused). */
    MPI_Comm node;
    int node_size = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
    /* Over TCP alone (BATON_TRANSPORTS without shm) no communicator has an area either. */
    const char *transports = getenv("BATON_TRANSPORTS");
    int one_host = node_size == size && (!transports || strstr(transports, "shm"));
    int v = rank == 1 ? 4242 : -1;
    if (one_host) {
        CHECK_MPI(MPI_Bcast(&v, 1, MPI_INT, 1, MPI_COMM_WORLD));
        CHECK(v == 4242, "bcast got %d", v);
    } else {
        refused(MPI_Bcast(&v, 1, MPI_INT, 1, MPI_COMM_WORLD), "bcast on a world across hosts", "shm");
    }

    static char big[64 * 1024];
    memset(big, rank == 0 ? 'b' : 0, sizeof big);
    refused(MPI_Bcast(big, (int)sizeof big, MPI_CHAR, 0, MPI_COMM_WORLD), "bcast of 64 KiB", "shm");

    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    refused(MPI_Ibcast(&v, 1, MPI_INT, 0, dup, &req), "ibcast on a communicator without an area", "shm");
    /* Its first blocking bcast gives it an area; the shared-memory bcast then serves. */
    v = rank == 0 ? 7 : -1;
    if (one_host) {
        CHECK_MPI(MPI_Bcast(&v, 1, MPI_INT, 0, dup));
        CHECK(v == 7, "bcast on the duplicate got %d", v);
    } else {
        refused(MPI_Bcast(&v, 1, MPI_INT, 0, dup), "bcast on a duplicate across hosts", "shm");
    }
    MPI_Comm_free(&dup);

    /* A reduce (its algorithm is not forced) to learn whether any process failed. */
    int bad = check_failures, any = 0;
    MPI_Reduce(&bad, &any, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0 && !any)
        printf("PASS coll_fallback\n");
    MPI_Finalize();
    return bad ? 1 : 0;
}
