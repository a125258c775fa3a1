/* MPI_Type_get_value_index: the predefined value-index pairs, MPI_DATATYPE_NULL for other
 * combinations, MPI_ERR_TYPE for invalid handles; the pair it returns works with MPI_MINLOC. */
/* ranks: 1 2 3 */
#include "check.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    struct { MPI_Datatype v, i, pair; } want[] = {
        {MPI_FLOAT, MPI_INT, MPI_FLOAT_INT},
        {MPI_DOUBLE, MPI_INT, MPI_DOUBLE_INT},
        {MPI_LONG, MPI_INT, MPI_LONG_INT},
        {MPI_SHORT, MPI_INT, MPI_SHORT_INT},
        {MPI_INT, MPI_INT, MPI_2INT},
        {MPI_LONG_DOUBLE, MPI_INT, MPI_LONG_DOUBLE_INT},
        {MPI_REAL, MPI_REAL, MPI_2REAL},
        {MPI_DOUBLE_PRECISION, MPI_DOUBLE_PRECISION, MPI_2DOUBLE_PRECISION},
        {MPI_INTEGER, MPI_INTEGER, MPI_2INTEGER},
        /* No predefined pair: */
        {MPI_FLOAT, MPI_FLOAT, MPI_DATATYPE_NULL},
        {MPI_DOUBLE, MPI_LONG, MPI_DATATYPE_NULL},
        {MPI_CHAR, MPI_INT, MPI_DATATYPE_NULL},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        MPI_Datatype got = MPI_DATATYPE_NULL;
        int rc = MPI_Type_get_value_index(want[k].v, want[k].i, &got);
        CHECK(rc == MPI_SUCCESS, "case %zu: rc %d", k, rc);
        CHECK(got == want[k].pair, "case %zu: got a different pair type", k);
    }
    /* A derived type is a valid handle with no predefined pair. */
    MPI_Datatype vec, got = MPI_INT;
    MPI_Type_vector(2, 1, 2, MPI_DOUBLE, &vec);
    MPI_Type_commit(&vec);
    CHECK(MPI_Type_get_value_index(vec, MPI_INT, &got) == MPI_SUCCESS && got == MPI_DATATYPE_NULL,
          "derived value type");
    MPI_Type_free(&vec);

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Type_get_value_index(MPI_DATATYPE_NULL, MPI_INT, &got);
    int cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TYPE, "MPI_DATATYPE_NULL value type: class %d", cls);
    rc = MPI_Type_get_value_index(MPI_DOUBLE, (MPI_Datatype)0x7654321, &got);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TYPE, "garbage index type: class %d", cls);
    char msg[MPI_MAX_ERROR_STRING];
    int len;
    MPI_Error_string(rc, msg, &len);
    CHECK(strstr(msg, "MPI_Type_get_value_index") && strstr(msg, "index_type"), "message: %s", msg);

    /* The pair type in a reduction: the smallest value is on the last rank. */
    MPI_Datatype pair;
    MPI_Type_get_value_index(MPI_DOUBLE, MPI_INT, &pair);
    struct { double v; int i; } in = {100.0 - rank, rank}, outp = {0, -1};
    CHECK(MPI_Allreduce(&in, &outp, 1, pair, MPI_MINLOC, MPI_COMM_WORLD) == MPI_SUCCESS, "allreduce");
    CHECK(outp.v == 100.0 - (size - 1) && outp.i == size - 1, "MINLOC gave (%g, %d)", outp.v, outp.i);
    return check_finish("dtype_value_index");
}
