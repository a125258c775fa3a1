/* ranks: 1 */
/* MPI_Status_set_elements with a derived datatype. The standard: after
   MPI_Status_set_elements(status, datatype, count), MPI_Get_elements
   (status, datatype) returns count (basic elements), and MPI_Get_count
   returns a compatible value (MPI_UNDEFINED when count basic elements are not
   a whole number of datatype items).
   MPICH 4.0.2 deviates: it treats count as a number of datatype items
   (set_elements(pair-of-shorts, 3) gives Get_count 3 and Get_elements 6),
   so this test is expected to FAIL under MPICH; Open MPI 4.1 follows the
   standard. */
#include "check.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_SHORT, &pair);
    MPI_Type_commit(&pair);
    MPI_Status st;
    memset(&st, 0, sizeof st);
    int c = -1, e = -1;
    CHECK_MPI(MPI_Status_set_elements(&st, pair, 4));
    MPI_Get_count(&st, pair, &c);
    MPI_Get_elements(&st, pair, &e);
    CHECK(e == 4 && c == 2, "set_elements(pair, 4): count %d (expected 2) elements %d (expected 4)",
          c, e);
    MPI_Get_count(&st, MPI_SHORT, &c);
    CHECK(c == 4, "set_elements(pair, 4): Get_count(MPI_SHORT) %d, expected 4", c);
    CHECK_MPI(MPI_Status_set_elements(&st, pair, 3));
    MPI_Get_count(&st, pair, &c);
    MPI_Get_elements(&st, pair, &e);
    CHECK(e == 3 && c == MPI_UNDEFINED,
          "set_elements(pair, 3): count %d (expected MPI_UNDEFINED) elements %d (expected 3)", c, e);
    MPI_Type_free(&pair);
    return check_finish("status_set_elements");
}
