/* Shared helpers for the Baton C test suite.  Standard MPI + C11 only. */
#ifndef BATON_TESTS_CHECK_H
#define BATON_TESTS_CHECK_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GCC >= 11 warns (-Wstringop-overflow) when MPI_STATUSES_IGNORE is a small
   integer cast to a pointer (as in MPICH's mpi.h); the warning is spurious. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

static int check_failures = 0;

/* Rank in MPI_COMM_WORLD, or -1 when MPI is not (or no longer) initialised. */
static inline int check_rank(void)
{
    int init = 0, fin = 0, r = -1;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin)
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

/* CHECK(cond, fmt, ...): on failure print "rank R: FAIL file:line: message". */
#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            check_failures++;                                                 \
            fprintf(stderr, "rank %d: FAIL %s:%d: ", check_rank(), __FILE__,  \
                    __LINE__);                                                \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, "\n");                                            \
            fflush(stderr);                                                   \
        }                                                                     \
    } while (0)

/* CHECK_MPI(call): the call must return MPI_SUCCESS. */
#define CHECK_MPI(call)                                                       \
    do {                                                                      \
        int check_rc_ = (call);                                               \
        if (check_rc_ != MPI_SUCCESS) {                                       \
            char check_s_[MPI_MAX_ERROR_STRING];                              \
            int check_l_ = 0;                                                 \
            check_s_[0] = '\0';                                               \
            MPI_Error_string(check_rc_, check_s_, &check_l_);                 \
            CHECK(0, "%s returned %d (%s)", #call, check_rc_, check_s_);      \
        }                                                                     \
    } while (0)

/* Expect an error whose class is `cls` (requires MPI_ERRORS_RETURN). */
#define CHECK_ERR_CLASS(call, cls)                                            \
    do {                                                                      \
        int check_rc_ = (call);                                               \
        int check_c_ = -1;                                                    \
        if (check_rc_ == MPI_SUCCESS) {                                       \
            CHECK(0, "%s succeeded, expected %s", #call, #cls);               \
        } else {                                                              \
            MPI_Error_class(check_rc_, &check_c_);                            \
            CHECK(check_c_ == (cls), "%s: error class %d, expected %s (%d)",  \
                  #call, check_c_, #cls, (int)(cls));                         \
        }                                                                     \
    } while (0)

/* Fill / verify a buffer with a pattern that depends on (seed, index). */
static inline unsigned char check_pattern(int seed, size_t i)
{
    return (unsigned char)((i * 131u + (size_t)seed * 17u + (i >> 8)) & 0xff);
}

static inline void check_fill(void *buf, size_t n, int seed)
{
    unsigned char *p = (unsigned char *)buf;
    for (size_t i = 0; i < n; i++)
        p[i] = check_pattern(seed, i);
}

/* Returns the index of the first mismatch, or -1. */
static inline long check_verify(const void *buf, size_t n, int seed)
{
    const unsigned char *p = (const unsigned char *)buf;
    for (size_t i = 0; i < n; i++)
        if (p[i] != check_pattern(seed, i))
            return (long)i;
    return -1;
}

/* Sum the failure counts on rank 0 with point-to-point messages only (no
   collectives, so that the suite does not depend on them). Returns the total
   on rank 0 and the rank's own count elsewhere. Must be called by all ranks. */
#define CHECK_TAG_COLLECT 32000
static inline int check_collect(int mine)
{
    int rank = 0, size = 1, total = mine;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        for (int p = 1; p < size; p++) {
            int v = 0;
            MPI_Recv(&v, 1, MPI_INT, p, CHECK_TAG_COLLECT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            total += v;
        }
        /* release the others only when everybody has reported */
        for (int p = 1; p < size; p++)
            MPI_Send(&total, 1, MPI_INT, p, CHECK_TAG_COLLECT, MPI_COMM_WORLD);
    } else {
        MPI_Send(&mine, 1, MPI_INT, 0, CHECK_TAG_COLLECT, MPI_COMM_WORLD);
        MPI_Recv(&total, 1, MPI_INT, 0, CHECK_TAG_COLLECT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    return total;
}

/* Collect failures of all ranks, finalize, rank 0 prints "PASS name".
   Returns the process exit status for main(). */
static inline int check_finish(const char *name)
{
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int total = check_collect(check_failures);
    MPI_Finalize();
    if (total == 0) {
        if (rank == 0) {
            printf("PASS %s\n", name);
            fflush(stdout);
        }
        return 0;
    }
    if (rank == 0) {
        printf("FAILED %s: %d check(s) failed\n", name, total);
        fflush(stdout);
    }
    return 1;
}

/* The name of predefined operation `op`, for messages. */
static inline const char *check_op_name(MPI_Op op)
{
    if (op == MPI_SUM) return "SUM";
    if (op == MPI_PROD) return "PROD";
    if (op == MPI_MAX) return "MAX";
    if (op == MPI_MIN) return "MIN";
    if (op == MPI_LAND) return "LAND";
    if (op == MPI_LOR) return "LOR";
    if (op == MPI_LXOR) return "LXOR";
    if (op == MPI_BAND) return "BAND";
    if (op == MPI_BOR) return "BOR";
    if (op == MPI_BXOR) return "BXOR";
    if (op == MPI_MAXLOC) return "MAXLOC";
    if (op == MPI_MINLOC) return "MINLOC";
    if (op == MPI_REPLACE) return "REPLACE";
    if (op == MPI_NO_OP) return "NO_OP";
    return "?";
}

#endif
