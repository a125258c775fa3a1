/* Helpers of the intercommunicator tests (tests/c/intercomm*.c).

   MPI_COMM_WORLD is cut into two groups in two ways ("kinds"):
     kind 0: world rank 0 alone (side 0) against all the others (side 1);
     kind 1: even world ranks (side 0) against odd ones (side 1).
   Within a side, ranks follow world ranks. The functions below compute, from
   the world size alone, which side a process is on, how large each side is and
   which world rank holds a rank of a side, so that every expected value is
   computed without asking the MPI under test. Standard MPI + C11 only. */
#ifndef BATON_TESTS_INTER_UTIL_H
#define BATON_TESTS_INTER_UTIL_H

#include "check.h"

#define IU_KINDS 2

static inline const char *iu_kind_name(int kind)
{
    return kind == 0 ? "1:rest" : "even:odd";
}

static inline int iu_side(int kind, int wrank)
{
    return kind == 0 ? wrank != 0 : wrank % 2;
}

static inline int iu_size(int kind, int side, int n)
{
    if (kind == 0)
        return side == 0 ? 1 : n - 1;
    return side == 0 ? (n + 1) / 2 : n / 2;
}

/* World rank of rank r of side `side`. */
static inline int iu_world(int kind, int side, int r)
{
    if (kind == 0)
        return side == 0 ? 0 : r + 1;
    return 2 * r + side;
}

/* Rank of world rank w within its side. */
static inline int iu_local(int kind, int w)
{
    return kind == 0 ? (w == 0 ? 0 : w - 1) : w / 2;
}

/* Splits the world by kind and builds the intercommunicator (leaders: local
   rank 0 of each side; peer: MPI_COMM_WORLD). */
static inline void iu_make(int kind, int tag, MPI_Comm *half, MPI_Comm *inter)
{
    int w, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &w);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int side = iu_side(kind, w);
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, side, w, half));
    CHECK_MPI(MPI_Intercomm_create(*half, 0, MPI_COMM_WORLD, iu_world(kind, 1 - side, 0), tag, inter));
}

/* Runs one collective in form `form`: 0 blocking, 1 nonblocking (MPI_Wait),
   2 persistent (started twice, then freed). `nb` and `init` take `&iu_rq`. */
#ifdef SKIP_MPICH_402_BUGS /* its persistent collectives fail on restart ("Invalid communicator") */
#define IU_FORMS 2
#else
#define IU_FORMS 3
#endif
#define IU_RUN(form, blocking, nb, init)                                      \
    do {                                                                      \
        MPI_Request iu_rq = MPI_REQUEST_NULL;                                 \
        if ((form) == 0) {                                                    \
            CHECK_MPI(blocking);                                              \
        } else if ((form) == 1) {                                             \
            CHECK_MPI(nb);                                                    \
            CHECK_MPI(MPI_Wait(&iu_rq, MPI_STATUS_IGNORE));                   \
        } else {                                                              \
            CHECK_MPI(init);                                                  \
            for (int iu_i = 0; iu_i < 2; iu_i++) {                            \
                CHECK_MPI(MPI_Start(&iu_rq));                                 \
                CHECK_MPI(MPI_Wait(&iu_rq, MPI_STATUS_IGNORE));               \
            }                                                                 \
            CHECK_MPI(MPI_Request_free(&iu_rq));                              \
        }                                                                     \
    } while (0)

static inline const char *iu_form_name(int form)
{
    return form == 0 ? "blocking" : form == 1 ? "nonblocking" : "persistent";
}

#endif
