/* opt-in */
/* ranks: 1 2 3 4 8 */
/* timeout: 120 */
/* MPI-IO shared file pointers (MPI 4.1 section 14.4.4), with a view whose etype is one record
   of four ints {MAGIC, rank, sequence, checksum}: MPI_File_write_shared from every rank (every
   record then present exactly once, whole, no overlap, each rank's in its program order, the
   individual pointer untouched, the shared one at the total); MPI_File_read_shared by every rank
   until end of file (every record read exactly once over all ranks, the last read short);
   seek_shared (SET, CUR, END) and get_position_shared; write_ordered (records in rank order,
   rank r writing r+1, twice: the second call continues after the first) and read_ordered
   giving each rank its own records back. */
#define _POSIX_C_SOURCE 200809L
#include "io_scratch.h"

enum { MAGIC = 0x5eed1e55, K = 16 };

static int rank, size;
static MPI_Datatype rec;

static void make_rec(int *p, int r, int seq)
{
    p[0] = MAGIC;
    p[1] = r;
    p[2] = seq;
    p[3] = r * 7919 + seq * 31 + 5;
}

static int rec_ok(const int *p)
{
    return p[0] == MAGIC && p[1] >= 0 && p[1] < size && p[3] == p[1] * 7919 + p[2] * 31 + 5;
}

/* Every (rank, seq < per) record exactly once in recs[0..n). */
static void check_all_once(const int *recs, int n, int per, const char *what)
{
    char *seen = calloc((size_t)size * per, 1);
    int bad = 0;
    CHECK(n == size * per, "%s: %d records, expected %d", what, n, size * per);
    for (int k = 0; k < n; k++) {
        const int *p = recs + 4 * k;
        if (!rec_ok(p) || p[2] < 0 || p[2] >= per) {
            if (bad++ < 5)
                CHECK(0, "%s: record %d is torn or foreign: %x %d %d %d", what, k, p[0], p[1], p[2], p[3]);
            continue;
        }
        if (seen[p[1] * per + p[2]]++ && bad++ < 5)
            CHECK(0, "%s: record (rank %d, seq %d) found twice", what, p[1], p[2]);
    }
    free(seen);
}

static void write_shared_and_read_shared(void)
{
    MPI_File fh;
    if (!io_open(MPI_COMM_WORLD, "shared", MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh))
        return;
    CHECK_MPI(MPI_File_set_view(fh, 0, rec, rec, "native", MPI_INFO_NULL));
    for (int s = 0; s < K; s++) {
        int r[4], cnt = -1;
        MPI_Status st;
        make_rec(r, rank, s);
        CHECK_MPI(MPI_File_write_shared(fh, r, 1, rec, &st));
        MPI_Get_count(&st, rec, &cnt);
        CHECK(cnt == 1, "write_shared: count %d", cnt);
    }
    MPI_Offset pos = -1, fsize = -1;
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK(pos == 0, "write_shared moved the individual pointer to %lld", (long long)pos);
    CHECK_MPI(MPI_File_sync(fh));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_MPI(MPI_File_sync(fh));
    CHECK_MPI(MPI_File_get_position_shared(fh, &pos));
    CHECK(pos == (MPI_Offset)size * K, "after write_shared: shared pointer %lld, expected %d", (long long)pos,
          size * K);
    CHECK_MPI(MPI_File_get_size(fh, &fsize));
    CHECK(fsize == (MPI_Offset)size * K * 16, "after write_shared: file size %lld, expected %d", (long long)fsize,
          size * K * 16);
    MPI_Barrier(MPI_COMM_WORLD); /* before anyone seeks the shared pointer again */

    int *all = malloc(sizeof(int) * 4 * (size_t)size * K);
    if (rank == 0) {
        MPI_Status st;
        int cnt = -1;
        CHECK_MPI(MPI_File_read_at(fh, 0, all, size * K, rec, &st));
        MPI_Get_count(&st, rec, &cnt);
        check_all_once(all, cnt, K, "write_shared file");
        /* one process's calls follow each other, so its records lie in its program order */
        int *last = malloc(sizeof(int) * (size_t)size);
        for (int r = 0; r < size; r++)
            last[r] = -1;
        for (int k = 0; k < cnt; k++) {
            const int *p = all + 4 * k;
            if (rec_ok(p)) {
                CHECK(p[2] > last[p[1]], "write_shared file: rank %d's seq %d after its seq %d", p[1], p[2],
                      last[p[1]]);
                last[p[1]] = p[2];
            }
        }
        free(last);
    }

    /* read_shared until end of file, three records at a time */
    CHECK_MPI(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    int *mine = malloc(sizeof(int) * 4 * ((size_t)size * K + 3));
    int n = 0, shorts = 0;
    for (;;) {
        MPI_Status st;
        int cnt = -1;
        CHECK_MPI(MPI_File_read_shared(fh, mine + 4 * n, 3, rec, &st));
        MPI_Get_count(&st, rec, &cnt);
        if (cnt <= 0 || n + cnt > size * K)
            break;
        shorts += cnt < 3;
        n += cnt;
    }
    CHECK(shorts <= 1, "read_shared: %d short reads before end of file", shorts);
    int *counts = malloc(sizeof(int) * (size_t)size), *displs = malloc(sizeof(int) * (size_t)size);
    int n4 = 4 * n;
    MPI_Gather(&n4, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int total = 0;
    if (rank == 0)
        for (int r = 0; r < size; r++) {
            displs[r] = total;
            total += counts[r];
        }
    int *gathered = malloc(sizeof(int) * (4 * (size_t)size * K + 4 * (size_t)size * 3));
    MPI_Gatherv(mine, n4, MPI_INT, gathered, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0)
        check_all_once(gathered, total / 4, K, "read_shared by all ranks");

    /* seek_shared and get_position_shared */
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_MPI(MPI_File_seek_shared(fh, 2, MPI_SEEK_SET));
    CHECK_MPI(MPI_File_get_position_shared(fh, &pos));
    CHECK(pos == 2, "seek_shared(2, SET): position %lld", (long long)pos);
    MPI_Barrier(MPI_COMM_WORLD); /* seek_shared need not synchronise: nobody moves on first */
    CHECK_MPI(MPI_File_seek_shared(fh, 3, MPI_SEEK_CUR));
    CHECK_MPI(MPI_File_get_position_shared(fh, &pos));
    CHECK(pos == 5, "seek_shared(3, CUR): position %lld, expected 5", (long long)pos);
    MPI_Barrier(MPI_COMM_WORLD); /* seek_shared need not synchronise: nobody moves on first */
    CHECK_MPI(MPI_File_seek_shared(fh, -1, MPI_SEEK_END));
    CHECK_MPI(MPI_File_get_position_shared(fh, &pos));
    CHECK(pos == (MPI_Offset)size * K - 1, "seek_shared(-1, END): position %lld, expected %d", (long long)pos,
          size * K - 1);
    MPI_Barrier(MPI_COMM_WORLD); /* seek_shared need not synchronise: nobody moves on first */
    if (rank == 0) {
        int r[4] = {0, 0, 0, 0}, cnt = -1;
        MPI_Status st;
        CHECK_MPI(MPI_File_read_shared(fh, r, 1, rec, &st));
        MPI_Get_count(&st, rec, &cnt);
        CHECK(cnt == 1 && memcmp(r, all + 4 * (size * K - 1), sizeof r) == 0,
              "read_shared after seek_shared(-1, END): not the last record");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_MPI(MPI_File_get_position_shared(fh, &pos));
    CHECK(pos == (MPI_Offset)size * K, "after reading the last record: shared pointer %lld", (long long)pos);
    io_close(&fh);
    free(all);
    free(mine);
    free(counts);
    free(displs);
    free(gathered);
}

static void ordered(void)
{
    MPI_File fh;
    if (!io_open(MPI_COMM_WORLD, "ordered", MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh))
        return;
    CHECK_MPI(MPI_File_set_view(fh, 0, rec, rec, "native", MPI_INFO_NULL));
    int first = size * (size + 1) / 2, total = first + size;
    int *w = malloc(sizeof(int) * 4 * (size_t)(size + 1)), cnt = -1;
    MPI_Status st;
    for (int s = 0; s <= rank; s++)
        make_rec(w + 4 * s, rank, s);
    CHECK_MPI(MPI_File_write_ordered(fh, w, rank + 1, rec, &st));
    MPI_Get_count(&st, rec, &cnt);
    CHECK(cnt == rank + 1, "write_ordered: count %d, expected %d", cnt, rank + 1);
    MPI_Offset pos = -1;
    CHECK_MPI(MPI_File_get_position_shared(fh, &pos));
    CHECK(pos == first, "after write_ordered: shared pointer %lld, expected %d", (long long)pos, first);
    MPI_Barrier(MPI_COMM_WORLD); /* seek_shared need not synchronise: nobody moves on first */
    make_rec(w, rank, 100);
    CHECK_MPI(MPI_File_write_ordered(fh, w, 1, rec, &st));
    CHECK_MPI(MPI_File_get_position_shared(fh, &pos));
    CHECK(pos == total, "after the second write_ordered: shared pointer %lld, expected %d", (long long)pos, total);
    CHECK_MPI(MPI_File_sync(fh));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_MPI(MPI_File_sync(fh));
    if (rank == 0) {
        int *all = malloc(sizeof(int) * 4 * (size_t)total);
        CHECK_MPI(MPI_File_read_at(fh, 0, all, total, rec, &st));
        MPI_Get_count(&st, rec, &cnt);
        CHECK(cnt == total, "write_ordered file: %d records, expected %d", cnt, total);
        int k = 0, bad = 0;
        for (int r = 0; r < size; r++)
            for (int s = 0; s <= r && k < cnt; s++, k++) {
                int want[4];
                make_rec(want, r, s);
                if (memcmp(all + 4 * k, want, sizeof want) != 0 && bad++ < 5)
                    CHECK(0, "write_ordered file: record %d is (%d, %d), expected (%d, %d)", k, all[4 * k + 1],
                          all[4 * k + 2], r, s);
            }
        for (int r = 0; r < size && k + r < cnt; r++) {
            int want[4];
            make_rec(want, r, 100);
            if (memcmp(all + 4 * (first + r), want, sizeof want) != 0 && bad++ < 5)
                CHECK(0, "write_ordered file: second-round record %d is (%d, %d), expected (%d, 100)", first + r,
                      all[4 * (first + r) + 1], all[4 * (first + r) + 2], r);
        }
        free(all);
    }
    CHECK_MPI(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    int *rd = calloc(4 * (size_t)(size + 1), sizeof(int));
    CHECK_MPI(MPI_File_read_ordered(fh, rd, rank + 1, rec, &st));
    MPI_Get_count(&st, rec, &cnt);
    CHECK(cnt == rank + 1, "read_ordered: count %d, expected %d", cnt, rank + 1);
    for (int s = 0; s <= rank; s++) {
        int want[4];
        make_rec(want, rank, s);
        CHECK(memcmp(rd + 4 * s, want, sizeof want) == 0, "read_ordered: record %d is (%d, %d), expected (%d, %d)", s,
              rd[4 * s + 1], rd[4 * s + 2], rank, s);
    }
    CHECK_MPI(MPI_File_get_position_shared(fh, &pos));
    CHECK(pos == first, "after read_ordered: shared pointer %lld, expected %d", (long long)pos, first);
    io_close(&fh);
    free(w);
    free(rd);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Type_contiguous(4, MPI_INT, &rec);
    MPI_Type_commit(&rec);
    if (io_scratch_begin("io_shared")) {
        write_shared_and_read_shared();
        ordered();
        io_scratch_end();
    }
    MPI_Type_free(&rec);
    return check_finish("io_shared");
}
