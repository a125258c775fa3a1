/* ranks: 1 2 3 4 8 */
/* Every predefined datatype: Type_size, Type_get_extent and
   Type_get_true_extent against sizeof/offsetof of the C type, and a
   send/receive of an array of values checked element by element.
   Pair types (MPI_2INT, MPI_FLOAT_INT, ...) use the standard's C struct
   layout {value; int}. */
#include "check.h"
#include <complex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <wchar.h>

static int rank, size, partner;
static MPI_Comm comm;

enum { N = 7 };

static void check_layout(MPI_Datatype t, const char *name, MPI_Aint csize, MPI_Aint cextent,
                         MPI_Aint ctrue)
{
    int sz = -1;
    MPI_Aint lb = -1, ext = -1, tlb = -1, text = -1;
    CHECK_MPI(MPI_Type_size(t, &sz));
    CHECK_MPI(MPI_Type_get_extent(t, &lb, &ext));
    CHECK_MPI(MPI_Type_get_true_extent(t, &tlb, &text));
    CHECK(sz == (int)csize, "%s: Type_size %d, C size %ld", name, sz, (long)csize);
    CHECK(lb == 0 && ext == cextent, "%s: lb %ld extent %ld, expected 0 %ld", name, (long)lb,
          (long)ext, (long)cextent);
    CHECK(tlb == 0 && text == ctrue, "%s: true lb %ld true extent %ld, expected 0 %ld", name,
          (long)tlb, (long)text, (long)ctrue);
}

/* exchange N elements with the partner */
static void xchg(const void *s, void *r, MPI_Datatype t, int tag)
{
    MPI_Request q[2];
    MPI_Status st;
    MPI_Irecv(r, N, t, partner, tag, comm, &q[0]);
    MPI_Isend(s, N, t, partner, tag, comm, &q[1]);
    MPI_Wait(&q[0], &st);
    MPI_Wait(&q[1], MPI_STATUS_IGNORE);
    int c = -1;
    MPI_Get_count(&st, t, &c);
    CHECK(c == N, "tag %d: Get_count %d", tag, c);
}

#define VAL(i, who) ((i) * 3 + 1 + (who) % 5)

#define BASIC(ctype, mpitype, tag)                                                         \
    do {                                                                                   \
        ctype s_[N], r_[N];                                                                \
        check_layout(mpitype, #mpitype, sizeof(ctype), sizeof(ctype), sizeof(ctype));      \
        for (int i = 0; i < N; i++) {                                                      \
            s_[i] = (ctype)VAL(i, rank);                                                   \
            r_[i] = (ctype)0;                                                              \
        }                                                                                  \
        xchg(s_, r_, mpitype, tag);                                                        \
        int ok_ = 1;                                                                       \
        for (int i = 0; i < N; i++)                                                        \
            if (r_[i] != (ctype)VAL(i, partner))                                           \
                ok_ = 0;                                                                   \
        CHECK(ok_, "%s: received values differ", #mpitype);                                \
    } while (0)

#define COMPLEX(ctype, rtype, mpitype, tag)                                                \
    do {                                                                                   \
        ctype s_[N], r_[N];                                                                \
        check_layout(mpitype, #mpitype, sizeof(ctype), sizeof(ctype), sizeof(ctype));      \
        for (int i = 0; i < N; i++) {                                                      \
            s_[i] = (rtype)VAL(i, rank) + (rtype)(i + 0.5) * (ctype)I;                     \
            r_[i] = 0;                                                                     \
        }                                                                                  \
        xchg(s_, r_, mpitype, tag);                                                        \
        int ok_ = 1;                                                                       \
        for (int i = 0; i < N; i++)                                                        \
            if (r_[i] != (rtype)VAL(i, partner) + (rtype)(i + 0.5) * (ctype)I)             \
                ok_ = 0;                                                                   \
        CHECK(ok_, "%s: received values differ", #mpitype);                                \
    } while (0)

#define PAIR(vtype, mpitype, tag)                                                          \
    do {                                                                                   \
        struct pair_ {                                                                     \
            vtype v;                                                                       \
            int i;                                                                         \
        } s_[N], r_[N];                                                                    \
        check_layout(mpitype, #mpitype, sizeof(vtype) + sizeof(int), sizeof(struct pair_), \
                     offsetof(struct pair_, i) + sizeof(int));                             \
        memset(r_, 0, sizeof r_);                                                          \
        for (int k = 0; k < N; k++) {                                                      \
            s_[k].v = (vtype)VAL(k, rank);                                                 \
            s_[k].i = -VAL(k, rank);                                                       \
        }                                                                                  \
        xchg(s_, r_, mpitype, tag);                                                        \
        int ok_ = 1;                                                                       \
        for (int k = 0; k < N; k++)                                                        \
            if (r_[k].v != (vtype)VAL(k, partner) || r_[k].i != -VAL(k, partner))          \
                ok_ = 0;                                                                   \
        CHECK(ok_, "%s: received values differ", #mpitype);                                \
    } while (0)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    partner = (rank ^ 1) < size ? (rank ^ 1) : rank;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);

    BASIC(char, MPI_CHAR, 1);
    BASIC(signed char, MPI_SIGNED_CHAR, 2);
    BASIC(unsigned char, MPI_UNSIGNED_CHAR, 3);
    BASIC(short, MPI_SHORT, 4);
    BASIC(unsigned short, MPI_UNSIGNED_SHORT, 5);
    BASIC(int, MPI_INT, 6);
    BASIC(unsigned, MPI_UNSIGNED, 7);
    BASIC(long, MPI_LONG, 8);
    BASIC(unsigned long, MPI_UNSIGNED_LONG, 9);
    BASIC(long long, MPI_LONG_LONG_INT, 10);
    BASIC(long long, MPI_LONG_LONG, 11);
    BASIC(unsigned long long, MPI_UNSIGNED_LONG_LONG, 12);
    BASIC(float, MPI_FLOAT, 13);
    BASIC(double, MPI_DOUBLE, 14);
    BASIC(long double, MPI_LONG_DOUBLE, 15);
    BASIC(wchar_t, MPI_WCHAR, 16);
    BASIC(bool, MPI_C_BOOL, 17);
    BASIC(int8_t, MPI_INT8_T, 18);
    BASIC(int16_t, MPI_INT16_T, 19);
    BASIC(int32_t, MPI_INT32_T, 20);
    BASIC(int64_t, MPI_INT64_T, 21);
    BASIC(uint8_t, MPI_UINT8_T, 22);
    BASIC(uint16_t, MPI_UINT16_T, 23);
    BASIC(uint32_t, MPI_UINT32_T, 24);
    BASIC(uint64_t, MPI_UINT64_T, 25);
    BASIC(MPI_Aint, MPI_AINT, 26);
    BASIC(MPI_Offset, MPI_OFFSET, 27);
    BASIC(MPI_Count, MPI_COUNT, 28);
    BASIC(unsigned char, MPI_BYTE, 29);
    COMPLEX(float _Complex, float, MPI_C_COMPLEX, 30);
    COMPLEX(float _Complex, float, MPI_C_FLOAT_COMPLEX, 31);
    COMPLEX(double _Complex, double, MPI_C_DOUBLE_COMPLEX, 32);
    COMPLEX(long double _Complex, long double, MPI_C_LONG_DOUBLE_COMPLEX, 33);
    PAIR(float, MPI_FLOAT_INT, 40);
    PAIR(double, MPI_DOUBLE_INT, 41);
    PAIR(long, MPI_LONG_INT, 42);
    PAIR(int, MPI_2INT, 43);
    PAIR(short, MPI_SHORT_INT, 44);
    PAIR(long double, MPI_LONG_DOUBLE_INT, 45);

    /* MPI_PACKED is measured in bytes */
    {
        int sz = -1;
        MPI_Type_size(MPI_PACKED, &sz);
        CHECK(sz == 1, "MPI_PACKED size %d", sz);
    }
    /* datatype names of a few predefined types */
    {
        char name[MPI_MAX_OBJECT_NAME];
        int len = -1;
        CHECK_MPI(MPI_Type_get_name(MPI_DOUBLE, name, &len));
        CHECK(strcmp(name, "MPI_DOUBLE") == 0 && len == 10, "name of MPI_DOUBLE '%s'", name);
        CHECK_MPI(MPI_Type_get_name(MPI_2INT, name, &len));
        CHECK(strcmp(name, "MPI_2INT") == 0, "name of MPI_2INT '%s'", name);
    }
    MPI_Comm_free(&comm);
    return check_finish("p2p_types");
}
