/* ranks: 1 2 3 4 8 */
/* Communicator attributes: create/free keyval, set/get/delete attr, copy
   callbacks on Comm_dup (MPI_COMM_DUP_FN, MPI_COMM_NULL_COPY_FN, a custom one
   changing the value, one returning flag = 0), delete callbacks on
   delete_attr, overwrite, Comm_free and (for COMM_SELF) MPI_Finalize;
   predefined attributes on COMM_WORLD. */
#include "check.h"
#include <stdint.h>

#define NKEYS 4
static int del_count[NKEYS];
static intptr_t del_last[NKEYS];
static int copy_count[NKEYS];
static int extra_ok = 1;
static int extra[NKEYS];

static int self_del_count = 0, self_del_finalized = -1;

static int key_index(void *extra_state)
{
    for (int i = 0; i < NKEYS; i++)
        if (extra_state == &extra[i])
            return i;
    extra_ok = 0;
    return 0;
}

static int delete_fn(MPI_Comm comm, int keyval, void *val, void *extra_state)
{
    (void)comm;
    (void)keyval;
    int i = key_index(extra_state);
    del_count[i]++;
    del_last[i] = (intptr_t)val;
    return MPI_SUCCESS;
}

static int copy_plus_one(MPI_Comm oldcomm, int keyval, void *extra_state, void *in, void *out,
                         int *flag)
{
    (void)oldcomm;
    (void)keyval;
    copy_count[key_index(extra_state)]++;
    *(void **)out = (void *)((intptr_t)in + 1);
    *flag = 1;
    return MPI_SUCCESS;
}

static int copy_no(MPI_Comm oldcomm, int keyval, void *extra_state, void *in, void *out,
                   int *flag)
{
    (void)oldcomm;
    (void)keyval;
    (void)in;
    (void)out;
    copy_count[key_index(extra_state)]++;
    *flag = 0;
    return MPI_SUCCESS;
}

static int self_delete(MPI_Comm comm, int keyval, void *val, void *extra_state)
{
    (void)keyval;
    (void)extra_state;
    (void)comm;
    if ((intptr_t)val == 4242)
        self_del_count++;
    MPI_Finalized(&self_del_finalized);
    return MPI_SUCCESS;
}

static intptr_t get(MPI_Comm c, int key, int *flag)
{
    void *v = NULL;
    *flag = -1;
    CHECK_MPI(MPI_Comm_get_attr(c, key, &v, flag));
    return (intptr_t)v;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* predefined attributes */
    {
        int *v = NULL, flag = 0;
        CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag));
        CHECK(flag && v && *v >= 32767, "MPI_TAG_UB flag %d value %d", flag, v ? *v : -1);
        flag = -1;
        CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &v, &flag));
        CHECK(flag == 0 || flag == 1, "UNIVERSE_SIZE flag %d", flag);
        if (flag == 1)
            CHECK(v && *v >= 1, "MPI_UNIVERSE_SIZE %d", *v); /* may be < size when oversubscribed */
        flag = -1;
        CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &v, &flag));
        CHECK(flag == 0 || flag == 1, "APPNUM flag %d", flag);
        if (flag == 1)
            CHECK(v && *v == 0, "MPI_APPNUM %d for a single-program launch", *v);
        flag = 0;
        CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &v, &flag));
        CHECK(flag == 1, "MPI_WTIME_IS_GLOBAL not set on COMM_WORLD");
        if (flag == 1)
            CHECK(v && (*v == 0 || *v == 1), "MPI_WTIME_IS_GLOBAL value %d", *v);
        /* the same predefined values on a dup? TAG_UB is on every comm in practice;
           the standard only requires COMM_WORLD, so only WORLD is checked. */
    }

    int key[NKEYS];
    CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, delete_fn, &key[0], &extra[0]));
    CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_fn, &key[1], &extra[1]));
    CHECK_MPI(MPI_Comm_create_keyval(copy_plus_one, delete_fn, &key[2], &extra[2]));
    CHECK_MPI(MPI_Comm_create_keyval(copy_no, delete_fn, &key[3], &extra[3]));
    for (int i = 0; i < NKEYS; i++)
        for (int j = 0; j < i; j++)
            CHECK(key[i] != key[j], "keyvals %d and %d equal", i, j);

    MPI_Comm base;
    MPI_Comm_dup(MPI_COMM_WORLD, &base);
    int flag;
    for (int i = 0; i < NKEYS; i++) {
        get(base, key[i], &flag);
        CHECK(flag == 0, "key %d set before set_attr", i);
        CHECK_MPI(MPI_Comm_set_attr(base, key[i], (void *)(intptr_t)(100 + i)));
    }
    for (int i = 0; i < NKEYS; i++) {
        intptr_t v = get(base, key[i], &flag);
        CHECK(flag == 1 && v == 100 + i, "key %d: flag %d value %ld", i, flag, (long)v);
        CHECK(del_count[i] == 0, "delete fn of key %d called early", i);
    }

    /* overwrite calls the delete fn with the old value */
    CHECK_MPI(MPI_Comm_set_attr(base, key[0], (void *)(intptr_t)200));
    CHECK(del_count[0] == 1 && del_last[0] == 100, "overwrite: delete count %d last %ld",
          del_count[0], (long)del_last[0]);
    CHECK(get(base, key[0], &flag) == 200 && flag, "value after overwrite");

    /* dup runs the copy callbacks */
    MPI_Comm d;
    CHECK_MPI(MPI_Comm_dup(base, &d));
    intptr_t v = get(d, key[0], &flag);
    CHECK(flag == 1 && v == 200, "DUP_FN: flag %d value %ld", flag, (long)v);
    get(d, key[1], &flag);
    CHECK(flag == 0, "NULL_COPY_FN: attribute present on dup");
    v = get(d, key[2], &flag);
    CHECK(flag == 1 && v == 103, "custom copy: flag %d value %ld (expected 103)", flag, (long)v);
    CHECK(copy_count[2] == 1, "custom copy fn called %d times", copy_count[2]);
    get(d, key[3], &flag);
    CHECK(flag == 0, "copy fn with flag=0: attribute present on dup");
    CHECK(copy_count[3] == 1, "flag=0 copy fn called %d times", copy_count[3]);
    /* the parent keeps its values */
    CHECK(get(base, key[2], &flag) == 102 && flag, "parent value changed by dup");

    /* attributes are per communicator: changing the dup does not touch the parent */
    CHECK_MPI(MPI_Comm_set_attr(d, key[1], (void *)(intptr_t)77));
    CHECK(get(base, key[1], &flag) == 101 && flag, "set on dup changed parent");

    /* delete_attr calls the delete fn */
    int before = del_count[2];
    CHECK_MPI(MPI_Comm_delete_attr(base, key[2]));
    CHECK(del_count[2] == before + 1 && del_last[2] == 102, "delete_attr: count %d last %ld",
          del_count[2], (long)del_last[2]);
    get(base, key[2], &flag);
    CHECK(flag == 0, "attribute still present after delete_attr");
    CHECK(get(d, key[2], &flag) == 103 && flag, "delete on parent removed dup's attribute");

    /* Comm_free calls delete for every attribute that is set: d has key0 (200),
       key1 (77), key2 (103) */
    int c0 = del_count[0], c1 = del_count[1], c2 = del_count[2], c3 = del_count[3];
    CHECK_MPI(MPI_Comm_free(&d));
    CHECK(del_count[0] == c0 + 1 && del_last[0] == 200, "free: key0 count %d last %ld",
          del_count[0] - c0, (long)del_last[0]);
    CHECK(del_count[1] == c1 + 1 && del_last[1] == 77, "free: key1 count %d last %ld",
          del_count[1] - c1, (long)del_last[1]);
    CHECK(del_count[2] == c2 + 1 && del_last[2] == 103, "free: key2 count %d last %ld",
          del_count[2] - c2, (long)del_last[2]);
    CHECK(del_count[3] == c3, "free: delete fn of key3 (not copied) called");

    /* free_keyval: handle becomes MPI_KEYVAL_INVALID; attributes already set
       stay until the communicator is freed, and their delete fn still runs */
    int k3 = key[3];
    CHECK_MPI(MPI_Comm_free_keyval(&key[3]));
    CHECK(key[3] == MPI_KEYVAL_INVALID, "free_keyval did not set MPI_KEYVAL_INVALID");
    c3 = del_count[3];
    v = get(base, k3, &flag);
    CHECK(flag == 1 && v == 103, "attribute of a freed keyval: flag %d value %ld", flag, (long)v);
    CHECK_MPI(MPI_Comm_free(&base));
    CHECK(del_count[3] == c3 + 1 && del_last[3] == 103, "free after free_keyval: count %d",
          del_count[3] - c3);
    CHECK(extra_ok, "callback got a wrong extra_state");
    for (int i = 0; i < 3; i++)
        CHECK_MPI(MPI_Comm_free_keyval(&key[i]));

    /* attribute on COMM_SELF is deleted at the start of MPI_Finalize,
       while MPI is still usable */
    int skey;
    CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &skey, NULL));
    CHECK_MPI(MPI_Comm_set_attr(MPI_COMM_SELF, skey, (void *)(intptr_t)4242));

    int mine = check_failures, total = 0;
    total = check_collect(mine);
    MPI_Finalize();
    CHECK(self_del_count == 1, "COMM_SELF attribute delete fn ran %d times in Finalize",
          self_del_count);
    CHECK(self_del_finalized == 0, "MPI_Finalized inside COMM_SELF delete fn gave %d",
          self_del_finalized);
    total += check_failures - mine;
    if (total == 0 && rank == 0)
        printf("PASS attr\n");
    return total ? 1 : 0;
}
