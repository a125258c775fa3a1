/* ranks: 1 2 3 */
/* Attribute rules beyond the basics of attr.c:
   1. MPI_Finalize deletes the attributes of MPI_COMM_SELF first, calling their delete
      callbacks in the reverse order of setting (MPI 4.1 section 11.2.2), while MPI is usable.
   2. A copy callback that fails makes MPI_Comm_dup / MPI_Type_dup fail with its error (the
      very code, when it is one of the application's); the attributes already copied to the
      abandoned duplicate are deleted (their delete callbacks run) and the parent keeps its own.
   3. A keyval freed while attributes use it stays valid for them: a later dup still copies
      them through its callback, and freeing the objects still runs the delete callbacks.
   4. The deprecated MPI_Keyval_create/free and MPI_Attr_put/get/delete (still in the MPI 5.0
      ABI) act on the same keyvals and attributes as their MPI_Comm_ replacements. */
#include "check.h"
#include <stdint.h>

#define NSELF 4
static int order[NSELF], norder = 0, finalized_in_cb = -1;

static int self_delete(MPI_Comm comm, int keyval, void *val, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)extra;
    if (norder < NSELF)
        order[norder] = (int)(intptr_t)val;
    norder++;
    MPI_Finalized(&finalized_in_cb);
    return MPI_SUCCESS;
}

static int deletes = 0;
static intptr_t last_deleted = 0;
static int count_delete(MPI_Comm comm, int keyval, void *val, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)extra;
    deletes++;
    last_deleted = (intptr_t)val;
    return MPI_SUCCESS;
}

static int copy_error = MPI_ERR_OTHER, copies = 0;
static int failing_copy(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag)
{
    (void)c;
    (void)k;
    (void)extra;
    (void)in;
    (void)out;
    copies++;
    *flag = 0;
    return copy_error;
}

static int copy_same(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag)
{
    (void)c;
    (void)k;
    (void)extra;
    copies++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

static int type_deletes = 0;
static int type_delete(MPI_Datatype t, int keyval, void *val, void *extra)
{
    (void)t;
    (void)keyval;
    (void)val;
    (void)extra;
    type_deletes++;
    return MPI_SUCCESS;
}

static int type_failing_copy(MPI_Datatype t, int k, void *extra, void *in, void *out, int *flag)
{
    (void)t;
    (void)k;
    (void)extra;
    (void)in;
    (void)out;
    *flag = 0;
    return MPI_ERR_OTHER;
}

static intptr_t get(MPI_Comm c, int key, int *flag)
{
    void *v = NULL;
    CHECK_MPI(MPI_Comm_get_attr(c, key, &v, flag));
    return (intptr_t)v;
}

static void copy_errors(void)
{
    MPI_Comm base, d = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &base);
    MPI_Comm_set_errhandler(base, MPI_ERRORS_RETURN);
    int kgood, kbad, flag;
    CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, count_delete, &kgood, NULL));
    CHECK_MPI(MPI_Comm_create_keyval(failing_copy, count_delete, &kbad, NULL));
    CHECK_MPI(MPI_Comm_set_attr(base, kgood, (void *)(intptr_t)7));
    CHECK_MPI(MPI_Comm_set_attr(base, kbad, (void *)(intptr_t)8));
    deletes = 0;
    CHECK_ERR_CLASS(MPI_Comm_dup(base, &d), MPI_ERR_OTHER);
    CHECK(d == MPI_COMM_NULL, "MPI_Comm_dup set newcomm although a copy callback failed");
    /* the copy of kgood made for the abandoned duplicate was deleted */
    CHECK(deletes == 1 && last_deleted == 7, "after the failed dup: %d deletes, last value %ld", deletes,
          (long)last_deleted);
    CHECK(get(base, kgood, &flag) == 7 && flag, "parent lost its attribute");
    CHECK(get(base, kbad, &flag) == 8 && flag, "parent lost the failing keyval's attribute");

    /* the application's own code comes back unchanged */
    int cls, code;
    CHECK_MPI(MPI_Add_error_class(&cls));
    CHECK_MPI(MPI_Add_error_code(cls, &code));
    copy_error = code;
    int rc = MPI_Comm_dup(base, &d);
    CHECK(rc == code, "MPI_Comm_dup returned %d, expected the callback's code %d", rc, code);
    int rcls = -1;
    MPI_Error_class(rc, &rcls);
    CHECK(rcls == cls, "error class %d, expected %d", rcls, cls);
    copy_error = MPI_ERR_OTHER;

    CHECK_MPI(MPI_Comm_delete_attr(base, kbad));
    CHECK_MPI(MPI_Comm_dup(base, &d));
    CHECK(get(d, kgood, &flag) == 7 && flag, "dup after the failing attribute went");
    CHECK_MPI(MPI_Comm_free(&d));
    CHECK_MPI(MPI_Comm_free(&base));
    MPI_Comm_free_keyval(&kgood);
    MPI_Comm_free_keyval(&kbad);

    /* MPI_Type_dup */
    MPI_Datatype t, t2 = MPI_DATATYPE_NULL;
    MPI_Type_contiguous(2, MPI_INT, &t);
    int tk;
    CHECK_MPI(MPI_Type_create_keyval(type_failing_copy, type_delete, &tk, NULL));
    CHECK_MPI(MPI_Type_set_attr(t, tk, (void *)(intptr_t)1));
    CHECK_ERR_CLASS(MPI_Type_dup(t, &t2), MPI_ERR_OTHER);
    CHECK(t2 == MPI_DATATYPE_NULL, "MPI_Type_dup set newtype although a copy callback failed");
    type_deletes = 0;
    CHECK_MPI(MPI_Type_free(&t));
    CHECK(type_deletes == 1, "Type_free ran %d delete callbacks", type_deletes);
    MPI_Type_free_keyval(&tk);
}

static void freed_keyvals(void)
{
    MPI_Comm a, b;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    int k, flag;
    CHECK_MPI(MPI_Comm_create_keyval(copy_same, count_delete, &k, NULL));
    int saved = k;
    CHECK_MPI(MPI_Comm_set_attr(a, k, (void *)(intptr_t)42));
    CHECK_MPI(MPI_Comm_free_keyval(&k));
    CHECK(k == MPI_KEYVAL_INVALID, "free_keyval left %d", k);
    copies = 0;
    CHECK_MPI(MPI_Comm_dup(a, &b));
    CHECK(copies == 1, "copy callback of a freed keyval ran %d times on dup", copies);
    CHECK(get(b, saved, &flag) == 42 && flag, "dup lost the attribute of a freed keyval");
    deletes = 0;
    CHECK_MPI(MPI_Comm_free(&a));
    CHECK_MPI(MPI_Comm_free(&b));
    CHECK(deletes == 2 && last_deleted == 42, "freeing both ran %d delete callbacks", deletes);

    /* datatypes: the same */
    MPI_Datatype t, t2;
    MPI_Type_contiguous(3, MPI_INT, &t);
    int tk;
    CHECK_MPI(MPI_Type_create_keyval(MPI_TYPE_DUP_FN, type_delete, &tk, NULL));
    int tsaved = tk;
    CHECK_MPI(MPI_Type_set_attr(t, tk, (void *)(intptr_t)5));
    CHECK_MPI(MPI_Type_free_keyval(&tk));
    CHECK(tk == MPI_KEYVAL_INVALID, "Type_free_keyval left %d", tk);
    CHECK_MPI(MPI_Type_dup(t, &t2));
    void *v = NULL;
    flag = 0;
    CHECK_MPI(MPI_Type_get_attr(t2, tsaved, &v, &flag));
    CHECK(flag && (intptr_t)v == 5, "Type_dup lost the attribute of a freed keyval (flag %d)", flag);
    type_deletes = 0;
    CHECK_MPI(MPI_Type_free(&t));
    CHECK_MPI(MPI_Type_free(&t2));
    CHECK(type_deletes == 2, "freeing both types ran %d delete callbacks", type_deletes);
}

static void deprecated(void)
{
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    int k, flag = -1;
    CHECK_MPI(MPI_Keyval_create(MPI_DUP_FN, count_delete, &k, NULL));
    CHECK_MPI(MPI_Attr_put(c, k, (void *)(intptr_t)11));
    void *v = NULL;
    CHECK_MPI(MPI_Attr_get(c, k, &v, &flag));
    CHECK(flag == 1 && (intptr_t)v == 11, "Attr_get: flag %d value %ld", flag, (long)(intptr_t)v);
    /* the same attribute through the new interface */
    CHECK(get(c, k, &flag) == 11 && flag, "Comm_get_attr does not see MPI_Attr_put's attribute");
    CHECK_MPI(MPI_Comm_set_attr(c, k, (void *)(intptr_t)12));
    CHECK_MPI(MPI_Attr_get(c, k, &v, &flag));
    CHECK(flag == 1 && (intptr_t)v == 12, "Attr_get after Comm_set_attr: %ld", (long)(intptr_t)v);
    deletes = 0;
    CHECK_MPI(MPI_Attr_delete(c, k));
    CHECK(deletes == 1 && last_deleted == 12, "Attr_delete ran %d delete callbacks", deletes);
    CHECK_MPI(MPI_Attr_get(c, k, &v, &flag));
    CHECK(flag == 0, "attribute still there after MPI_Attr_delete");
    int *tag_ub = NULL;
    CHECK_MPI(MPI_Attr_get(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag));
    CHECK(flag && tag_ub && *tag_ub >= 32767, "MPI_Attr_get(MPI_TAG_UB)");
    CHECK_MPI(MPI_Keyval_free(&k));
    CHECK(k == MPI_KEYVAL_INVALID, "MPI_Keyval_free left %d", k);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    CHECK_ERR_CLASS(MPI_Attr_put(c, MPI_KEYVAL_INVALID, NULL), MPI_ERR_KEYVAL);
    MPI_Comm_free(&c);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    copy_errors();
    freed_keyvals();
    deprecated();

    /* set in the order 1, 2, 3, 4; the keyvals made in the order 3, 1, 4, 2, so that neither
       keyval order nor its reverse is the order of deletion */
    int keys[NSELF];
    static const int made[NSELF] = {2, 0, 3, 1};
    for (int i = 0; i < NSELF; i++)
        CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &keys[made[i]], NULL));
    for (int i = 0; i < NSELF; i++)
        CHECK_MPI(MPI_Comm_set_attr(MPI_COMM_SELF, keys[i], (void *)(intptr_t)(i + 1)));
    /* overwriting keeps an attribute's place and deletes the old value now */
    CHECK_MPI(MPI_Comm_set_attr(MPI_COMM_SELF, keys[1], (void *)(intptr_t)2));
    norder = 0;
    /* one freed keyval among them: its attribute is still deleted at MPI_Finalize */
    CHECK_MPI(MPI_Comm_free_keyval(&keys[2]));

    int total = check_collect(check_failures);
    int mine = check_failures;
    MPI_Finalize();
    CHECK(norder == NSELF, "MPI_Finalize ran %d COMM_SELF delete callbacks, expected %d", norder, NSELF);
    for (int i = 0; i < NSELF && i < norder; i++)
        CHECK(order[i] == NSELF - i, "delete %d was of the attribute set %d-th, expected %d-th", i, order[i], NSELF - i);
    CHECK(finalized_in_cb == 0, "MPI_Finalized gave %d inside the callbacks", finalized_in_cb);
    total += check_failures - mine;
    if (total == 0 && rank == 0)
        printf("PASS attr_rules\n");
    return total ? 1 : 0;
}
