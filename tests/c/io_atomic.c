/* opt-in */
/* ranks: 1 2 3 4 8 */
/* timeout: 120 */
/* MPI-IO consistency (MPI 4.1 section 14.6.1): a file opens in nonatomic mode,
   MPI_File_set_atomicity/get_atomicity switch it (collectively); in atomic mode concurrent
   overlapping writes of every rank to the same noncontiguous region (each writes one value all
   over it) leave the whole region holding one rank's value, and the gaps between its blocks keep
   what was there; a read concurrent with writes of whole-region values sees one write entirely
   (never a mix); in nonatomic mode the sequence write, sync, barrier, sync makes each rank's
   block visible to its neighbour, round after round. */
#define _POSIX_C_SOURCE 200809L
#include "io_scratch.h"

enum { BL = 256, NB = 64, ROUNDS = 3, FLIPS = 20 };

static int rank, size;

static int gap(int g) { return -1 - g; }

static void atomic_overlap(void)
{
    MPI_File fh;
    if (!io_open(MPI_COMM_WORLD, "atomic", MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh))
        return;
    int flag = -1;
    CHECK_MPI(MPI_File_get_atomicity(fh, &flag));
    CHECK(flag == 0, "a new file handle is in atomic mode (%d)", flag);
    CHECK_MPI(MPI_File_set_atomicity(fh, 1));
    CHECK_MPI(MPI_File_get_atomicity(fh, &flag));
    CHECK(flag == 1, "set_atomicity(1): get_atomicity gives %d", flag);

    const int total = 2 * NB * BL;
    int *img = malloc(sizeof(int) * (size_t)total), *buf = malloc(sizeof(int) * NB * BL);
    if (rank == 0) {
        for (int g = 0; g < total; g++)
            img[g] = gap(g);
        CHECK_MPI(MPI_File_write_at(fh, 0, img, total, MPI_INT, MPI_STATUS_IGNORE));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Datatype ft; /* the even blocks of BL ints */
    CHECK_MPI(MPI_Type_vector(NB, BL, 2 * BL, MPI_INT, &ft));
    CHECK_MPI(MPI_Type_commit(&ft));
    for (int round = 0; round < ROUNDS; round++) {
        CHECK_MPI(MPI_File_set_view(fh, 0, MPI_INT, ft, "native", MPI_INFO_NULL));
        for (int k = 0; k < NB * BL; k++)
            buf[k] = (round + 1) * 1000 + rank;
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_MPI(MPI_File_write_at(fh, 0, buf, NB * BL, MPI_INT, MPI_STATUS_IGNORE));
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_MPI(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
        if (rank == 0) {
            memset(img, 0, sizeof(int) * (size_t)total);
            CHECK_MPI(MPI_File_read_at(fh, 0, img, total, MPI_INT, MPI_STATUS_IGNORE));
            int first = img[0], bad = 0;
            CHECK(first >= (round + 1) * 1000 && first < (round + 1) * 1000 + size,
                  "atomic round %d: element 0 is %d, no writer's value", round, first);
            for (int g = 0; g < total; g++) {
                int want = (g / BL) % 2 ? gap(g) : first;
                if (img[g] != want && bad++ < 5)
                    CHECK(0, "atomic round %d: element %d is %d, expected %d (the writes mixed)", round, g, img[g],
                          want);
            }
        }
    }
    MPI_Type_free(&ft);

    /* a reader concurrent with whole-region writes sees one of them entirely */
    if (rank == 0) {
        for (int k = 0; k < NB * BL; k++)
            buf[k] = 49999;
        CHECK_MPI(MPI_File_write_at(fh, 0, buf, NB * BL, MPI_INT, MPI_STATUS_IGNORE));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (size >= 2 && rank < 2) {
        for (int f = 0; f < FLIPS; f++) {
            if (rank == 0) {
                for (int k = 0; k < NB * BL; k++)
                    buf[k] = 50000 + f;
                CHECK_MPI(MPI_File_write_at(fh, 0, buf, NB * BL, MPI_INT, MPI_STATUS_IGNORE));
            } else {
                CHECK_MPI(MPI_File_read_at(fh, 0, buf, NB * BL, MPI_INT, MPI_STATUS_IGNORE));
                int bad = 0;
                CHECK(buf[0] >= 49999 && buf[0] < 50000 + FLIPS, "atomic read %d: int 0 is %d, no write's value", f,
                      buf[0]);
                for (int k = 1; k < NB * BL; k++)
                    if (buf[k] != buf[0] && bad++ < 3)
                        CHECK(0, "atomic read %d: int %d is %d, int 0 is %d (saw a write half done)", f, k, buf[k],
                              buf[0]);
            }
        }
    }
    CHECK_MPI(MPI_File_set_atomicity(fh, 0));
    CHECK_MPI(MPI_File_get_atomicity(fh, &flag));
    CHECK(flag == 0, "set_atomicity(0): get_atomicity gives %d", flag);
    io_close(&fh);
    free(img);
    free(buf);
}

static void sync_barrier_sync(void)
{
    MPI_File fh;
    if (!io_open(MPI_COMM_WORLD, "nonatomic", MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh))
        return;
    int buf[BL];
    int next = (rank + 1) % size;
    for (int round = 0; round < ROUNDS; round++) {
        for (int k = 0; k < BL; k++)
            buf[k] = round * 100000 + rank * 1000 + k;
        CHECK_MPI(MPI_File_write_at(fh, (MPI_Offset)rank * BL * sizeof(int), buf, BL, MPI_INT, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_File_sync(fh));
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_MPI(MPI_File_sync(fh));
        memset(buf, 0, sizeof buf);
        CHECK_MPI(MPI_File_read_at(fh, (MPI_Offset)next * BL * sizeof(int), buf, BL, MPI_INT, MPI_STATUS_IGNORE));
        int bad = 0;
        for (int k = 0; k < BL; k++)
            if (buf[k] != round * 100000 + next * 1000 + k && bad++ < 3)
                CHECK(0, "round %d: int %d of rank %d's block is %d, expected %d", round, k, next, buf[k],
                      round * 100000 + next * 1000 + k);
        /* the next round's writes conflict with these reads: the same sequence orders them */
        CHECK_MPI(MPI_File_sync(fh));
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_MPI(MPI_File_sync(fh));
    }
    io_close(&fh);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (io_scratch_begin("io_atomic")) {
        atomic_overlap();
        sync_barrier_sync();
        io_scratch_end();
    }
    return check_finish("io_atomic");
}
