/* ranks: 1 2 */
/* timeout: 120 */
/* Type maps of more than 2^26 blocks (MPI_Type_vector of 2^27 blocks, vectors of vectors of 2^28)
   commit quickly, report their size and extent, and pack and travel correctly; types just past
   the flat form's size (10^5 blocks, vectors of vectors, a struct around one) communicate and
   pack byte for byte like their type maps. */
#include "check.h"
#include <stdint.h>

static double now(void) { return MPI_Wtime(); }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int to = (rank + 1) % size, from = (rank + size - 1) % size;

    /* 2^27 blocks of one int, and 2^14 vectors of 2^14 ints (2^28 blocks). */
    double t0 = now();
    MPI_Datatype big, inner, nest;
    CHECK_MPI(MPI_Type_vector(1 << 27, 1, 2, MPI_INT, &big));
    CHECK_MPI(MPI_Type_commit(&big));
    CHECK_MPI(MPI_Type_vector(1 << 14, 1, 3, MPI_INT, &inner));
    CHECK_MPI(MPI_Type_create_hvector(1 << 14, 1, (MPI_Aint)1 << 20, inner, &nest));
    CHECK_MPI(MPI_Type_commit(&nest));
    double took = now() - t0;
    CHECK(took < 2.0, "building types of 2^27 and 2^28 blocks took %.2f s", took);
    MPI_Count sz = -1, lb = -1, ext = -1;
    CHECK_MPI(MPI_Type_size_c(big, &sz));
    CHECK_MPI(MPI_Type_get_extent_c(big, &lb, &ext));
    CHECK(sz == (MPI_Count)4 << 27 && lb == 0 && ext == (((MPI_Count)1 << 28) - 1) * 4, "2^27 blocks: size %lld lb %lld extent %lld",
          (long long)sz, (long long)lb, (long long)ext);
    CHECK_MPI(MPI_Type_size_c(nest, &sz));
    CHECK(sz == (MPI_Count)4 << 28, "2^28 blocks: size %lld", (long long)sz);
    MPI_Type_free(&big);
    MPI_Type_free(&nest);
    MPI_Type_free(&inner);

    /* 2^27 blocks of one byte, all at one address (stride 0): 128 MiB of copies of one byte,
       packed and sent from a buffer of one byte. */
    const size_t n27 = (size_t)1 << 27;
    MPI_Datatype rep;
    CHECK_MPI(MPI_Type_create_hvector(1 << 27, 1, 0, MPI_BYTE, &rep));
    CHECK_MPI(MPI_Type_commit(&rep));
    unsigned char one = (unsigned char)(0x5a + rank);
    unsigned char *got = malloc(n27);
    CHECK(got != NULL, "no memory for 128 MiB");
    if (got) {
        memset(got, 0, n27);
        CHECK_MPI(MPI_Sendrecv(&one, 1, rep, to, 1, got, (int)n27, MPI_BYTE, from, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        size_t bad = 0;
        for (size_t i = 0; i < n27; i++)
            bad += got[i] != (unsigned char)(0x5a + from);
        CHECK(bad == 0, "stride-0 vector of 2^27 bytes: %zu bytes wrong", bad);
        memset(got, 0, n27);
        int pos = 0;
        CHECK_MPI(MPI_Pack(&one, 1, rep, got, (int)n27, &pos, MPI_COMM_WORLD));
        CHECK(pos == (int)n27 && got[0] == one && got[n27 / 2 + 1] == one && got[n27 - 1] == one,
              "MPI_Pack of 2^27 copies: position %d", pos);
        free(got);
    }
    MPI_Type_free(&rep);

    /* Just past the flat form: 100000 ints at stride 3, two elements. */
    const int nb = 100000;
    MPI_Datatype col;
    CHECK_MPI(MPI_Type_vector(nb, 1, 3, MPI_INT, &col));
    CHECK_MPI(MPI_Type_commit(&col));
    MPI_Aint clb, cext;
    MPI_Type_get_extent(col, &clb, &cext);
    size_t words = (size_t)(cext / 4) + (size_t)3 * nb;
    int *src = malloc(words * sizeof(int)), *dst = malloc(words * sizeof(int));
    for (size_t i = 0; i < words; i++) {
        src[i] = (int)i * 10 + rank;
        dst[i] = -1;
    }
    MPI_Request q[2];
    CHECK_MPI(MPI_Irecv(dst, 2, col, from, 2, MPI_COMM_WORLD, &q[0]));
    CHECK_MPI(MPI_Isend(src, 2, col, to, 2, MPI_COMM_WORLD, &q[1]));
    MPI_Status st[2];
    CHECK_MPI(MPI_Waitall(2, q, st));
    int cnt = -1;
    MPI_Get_count(&st[0], col, &cnt);
    CHECK(cnt == 2, "received %d elements of the long vector", cnt);
    size_t bad = 0;
    for (size_t e = 0; e < 2; e++)
        for (size_t k = 0; k < (size_t)nb; k++) {
            size_t i = e * (size_t)(cext / 4) + 3 * k;
            bad += dst[i] != (int)i * 10 + from;
        }
    size_t touched = 0;
    for (size_t i = 0; i < words; i++)
        touched += dst[i] != -1;
    CHECK(bad == 0 && touched == 2 * (size_t)nb, "long vector: %zu wrong, %zu written (expected %d)", bad, touched,
          2 * nb);

    /* A struct of an int, the long vector, a double: packed in type-map order. */
    struct {
        int a;
        double d;
    } ends = {7 + rank, 2.5};
    MPI_Aint disp[3];
    MPI_Get_address(&ends.a, &disp[0]);
    MPI_Get_address(src, &disp[1]);
    MPI_Get_address(&ends.d, &disp[2]);
    int bl[3] = {1, 1, 1};
    MPI_Datatype tys[3] = {MPI_INT, col, MPI_DOUBLE}, st3;
    CHECK_MPI(MPI_Type_create_struct(3, bl, disp, tys, &st3));
    CHECK_MPI(MPI_Type_commit(&st3));
    int psize = 0;
    MPI_Pack_size(1, st3, MPI_COMM_WORLD, &psize);
    char *pk = malloc((size_t)psize);
    int pos = 0;
    CHECK_MPI(MPI_Pack(MPI_BOTTOM, 1, st3, pk, psize, &pos, MPI_COMM_WORLD));
    CHECK(pos == 4 + 4 * nb + 8, "struct packed %d bytes", pos);
    int first, last, mid;
    double dd;
    memcpy(&first, pk, 4);
    memcpy(&mid, pk + 4 + 4 * 5000, 4);
    memcpy(&last, pk + 4 + 4 * (nb - 1), 4);
    memcpy(&dd, pk + 4 + 4 * nb, 8);
    CHECK(first == 7 + rank && mid == src[3 * 5000] && last == src[3 * (nb - 1)] && dd == 2.5,
          "struct packed: %d %d %d %g", first, mid, last, dd);
    /* Unpacked into the receive buffer's twin: the same bytes come back. */
    ends.a = 0;
    ends.d = 0;
    memset(src, 0xff, words * sizeof(int));
    pos = 0;
    CHECK_MPI(MPI_Unpack(pk, psize, &pos, MPI_BOTTOM, 1, st3, MPI_COMM_WORLD));
    CHECK(ends.a == 7 + rank && ends.d == 2.5 && src[3 * 5000] == mid && src[1] == -1, "struct unpacked: %d %g %d %d",
          ends.a, ends.d, src[3 * 5000], src[1]);
    free(pk);
    free(src);
    free(dst);
    MPI_Type_free(&st3);
    MPI_Type_free(&col);
    return check_finish("dtype_huge_maps");
}
