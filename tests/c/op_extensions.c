/* ranks: 1 2 3 */
/* Reductions Baton accepts beyond the standard's table (MPI 4.1 section 6.9.2), as MPICH does
   and as programs expect (the OSU benchmarks reduce MPI_CHAR): MPI_SUM, MPI_PROD, MPI_MIN,
   MPI_MAX, logical and bitwise ops on MPI_CHAR (a C char, signed or not as the platform's);
   MPI_LAND, MPI_LOR, MPI_LXOR on MPI_AINT, MPI_OFFSET, MPI_COUNT and MPI_INTEGER (bitwise ops
   on these are standard). Results are checked in MPI_Reduce_local and in MPI_Allreduce. */
#include "check.h"
#include <stdint.h>

static int rank, size;

/* MPI_CHAR: rank r contributes c(r, j); results computed here in C's char arithmetic. */
static char cval(int r, int j)
{
    return (char)((r * 37 + j * 11 + 3) % 100 - 40); /* also negative where char is signed */
}

static void char_ops(void)
{
    enum { N = 16 };
    static const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_LAND, MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR,
                                 MPI_BXOR};
    static const char *names[] = {"SUM", "PROD", "MIN", "MAX", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR"};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        char in[N], out[N], want[N];
        for (int j = 0; j < N; j++) {
            in[j] = cval(rank, j);
            char acc = cval(0, j);
            for (int r = 1; r < size; r++) {
                char v = cval(r, j);
                switch (o) {
                case 0: acc = (char)(acc + v); break;
                case 1: acc = (char)(acc * v); break;
                case 2: acc = v < acc ? v : acc; break;
                case 3: acc = v > acc ? v : acc; break;
                case 4: acc = (char)(acc && v); break;
                case 5: acc = (char)(acc || v); break;
                case 6: acc = (char)(!acc != !v); break;
                case 7: acc = (char)(acc & v); break;
                case 8: acc = (char)(acc | v); break;
                default: acc = (char)(acc ^ v); break;
                }
            }
            want[j] = acc;
        }
        int rc = MPI_Allreduce(in, out, N, MPI_CHAR, ops[o], MPI_COMM_WORLD);
        CHECK(rc == MPI_SUCCESS, "Allreduce MPI_%s on MPI_CHAR failed", names[o]);
        if (rc != MPI_SUCCESS)
            continue;
        for (int j = 0; j < N; j++) {
            /* one process: Allreduce copies, logical ops included */
            char w = size == 1 ? in[j] : want[j];
            CHECK(out[j] == w, "Allreduce MPI_%s on MPI_CHAR [%d]: %d, expected %d", names[o], j, out[j], w);
        }
        /* Reduce_local: inout = in op inout */
        char a[N], b[N];
        for (int j = 0; j < N; j++) {
            a[j] = cval(1, j);
            b[j] = cval(2, j);
        }
        CHECK_MPI(MPI_Reduce_local(a, b, N, MPI_CHAR, ops[o]));
        for (int j = 0; j < N; j++) {
            char x = cval(1, j), y = cval(2, j), w;
            switch (o) {
            case 0: w = (char)(x + y); break;
            case 1: w = (char)(x * y); break;
            case 2: w = x < y ? x : y; break;
            case 3: w = x > y ? x : y; break;
            case 4: w = (char)(x && y); break;
            case 5: w = (char)(x || y); break;
            case 6: w = (char)(!x != !y); break;
            case 7: w = (char)(x & y); break;
            case 8: w = (char)(x | y); break;
            default: w = (char)(x ^ y); break;
            }
            CHECK(b[j] == w, "Reduce_local MPI_%s on MPI_CHAR [%d]: %d, expected %d", names[o], j, b[j], w);
        }
    }
}

/* Logical ops on 64-bit integers: values that are zero on some ranks, large elsewhere. */
static int64_t lval(int r, int j)
{
    return (r + j) % 3 == 0 ? 0 : ((int64_t)1 << 40) * (r + 1) + j;
}

static void logical_ops(MPI_Datatype t, const char *tname, size_t width)
{
    enum { N = 9 };
    static const MPI_Op ops[] = {MPI_LAND, MPI_LOR, MPI_LXOR};
    static const char *names[] = {"LAND", "LOR", "LXOR"};
    for (int o = 0; o < 3; o++) {
        int64_t in8[N], out8[N];
        int32_t in4[N], out4[N];
        void *in = width == 8 ? (void *)in8 : (void *)in4, *out = width == 8 ? (void *)out8 : (void *)out4;
        for (int j = 0; j < N; j++) {
            in8[j] = lval(rank, j);
            in4[j] = (int32_t)(lval(rank, j) ? rank + j + 1 : 0);
        }
        int rc = MPI_Allreduce(in, out, N, t, ops[o], MPI_COMM_WORLD);
        CHECK(rc == MPI_SUCCESS, "Allreduce MPI_%s on %s failed", names[o], tname);
        if (rc != MPI_SUCCESS)
            continue;
        for (int j = 0; j < N; j++) {
            int acc = lval(0, j) != 0;
            for (int r = 1; r < size; r++) {
                int v = lval(r, j) != 0;
                acc = o == 0 ? (acc && v) : o == 1 ? (acc || v) : (acc != v);
            }
            long long got = width == 8 ? (long long)out8[j] : (long long)out4[j];
            if (size == 1)
                CHECK(got == (width == 8 ? (long long)in8[j] : (long long)in4[j]), "one process: copy");
            else
                CHECK(got == acc, "Allreduce MPI_%s on %s [%d]: %lld, expected %d", names[o], tname, j, got, acc);
        }
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char_ops();
    int s = 0;
    MPI_Type_size(MPI_AINT, &s);
    logical_ops(MPI_AINT, "MPI_AINT", (size_t)s);
    logical_ops(MPI_OFFSET, "MPI_OFFSET", 8);
    logical_ops(MPI_COUNT, "MPI_COUNT", 8);
    MPI_Type_size(MPI_INTEGER, &s);
    if (s == 4 || s == 8)
        logical_ops(MPI_INTEGER, "MPI_INTEGER", (size_t)s);
    return check_finish("op_extensions");
}
