/* ranks: 1 2 3 4 8 */
/* Info objects: create, set, get / get_string (buflen semantics and
   truncation), get_valuelen, delete, get_nkeys, get_nthkey, dup, free,
   MPI_INFO_ENV, Info_create_env, error classes for bad keys.
   MPI-4.0 functions are guarded by MPI_VERSION >= 4. */
#include "check.h"

static int has_key(MPI_Info info, const char *key)
{
    int n = -1;
    MPI_Info_get_nkeys(info, &n);
    for (int i = 0; i < n; i++) {
        char k[MPI_MAX_INFO_KEY + 1];
        memset(k, 0, sizeof k);
        CHECK_MPI(MPI_Info_get_nthkey(info, i, k));
        if (strcmp(k, key) == 0)
            return 1;
    }
    return 0;
}

static void expect_value(MPI_Info info, const char *key, const char *val, const char *what)
{
    char buf[MPI_MAX_INFO_VAL + 1];
    int flag = -1;
    memset(buf, 0, sizeof buf);
    CHECK_MPI(MPI_Info_get(info, key, MPI_MAX_INFO_VAL, buf, &flag));
    CHECK(flag == 1 && strcmp(buf, val) == 0, "%s: get '%s' -> flag %d value '%s', expected '%s'",
          what, key, flag, buf, val);
    int vlen = -1;
    flag = -1;
    CHECK_MPI(MPI_Info_get_valuelen(info, key, &vlen, &flag));
    CHECK(flag == 1 && vlen == (int)strlen(val), "%s: valuelen of '%s' %d flag %d, expected %zu",
          what, key, vlen, flag, strlen(val));
}

int main(int argc, char **argv)
{
#if MPI_VERSION >= 4
    /* Info_create_env may be called before MPI_Init. */
    MPI_Info env_early = MPI_INFO_NULL;
    CHECK_MPI(MPI_Info_create_env(argc, argv, &env_early));
    CHECK(env_early != MPI_INFO_NULL, "Info_create_env before Init gave INFO_NULL");
#endif
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);

    CHECK(MPI_MAX_INFO_KEY >= 32 && MPI_MAX_INFO_VAL >= 256, "MAX_INFO_KEY %d MAX_INFO_VAL %d",
          MPI_MAX_INFO_KEY, MPI_MAX_INFO_VAL);

    MPI_Info info = MPI_INFO_NULL;
    CHECK_MPI(MPI_Info_create(&info));
    CHECK(info != MPI_INFO_NULL, "Info_create gave INFO_NULL");
    int n = -1;
    MPI_Info_get_nkeys(info, &n);
    CHECK(n == 0, "new info has %d keys", n);

    const char *long_val = "a longer value";
    CHECK_MPI(MPI_Info_set(info, "k1", "v1"));
    CHECK_MPI(MPI_Info_set(info, "key2", long_val));
    CHECK_MPI(MPI_Info_set(info, "third_key", "3"));
    MPI_Info_get_nkeys(info, &n);
    CHECK(n == 3, "nkeys %d after 3 sets", n);
    CHECK_MPI(MPI_Info_set(info, "k1", "replaced"));
    MPI_Info_get_nkeys(info, &n);
    CHECK(n == 3, "nkeys %d after overwriting a key", n);
    expect_value(info, "k1", "replaced", "overwrite");
    expect_value(info, "key2", long_val, "plain");
    expect_value(info, "third_key", "3", "one-character value");
    CHECK(has_key(info, "k1") && has_key(info, "key2") && has_key(info, "third_key"),
          "nthkey does not enumerate all keys");

    /* missing key */
    {
        char buf[16] = "untouched";
        int flag = -1, vlen = -5;
        CHECK_MPI(MPI_Info_get(info, "nope", 15, buf, &flag));
        CHECK(flag == 0 && strcmp(buf, "untouched") == 0, "get missing key: flag %d buf '%s'",
              flag, buf);
        flag = -1;
        CHECK_MPI(MPI_Info_get_valuelen(info, "nope", &vlen, &flag));
        CHECK(flag == 0, "get_valuelen missing key: flag %d", flag);
    }

    /* MPI_Info_get truncation with a short valuelen: see info_get_truncate.c */

#if MPI_VERSION >= 4
    /* MPI_Info_get_string: buflen in = buffer size, out = strlen(value)+1 */
    {
        char buf[64];
        int buflen = sizeof buf, flag = -1;
        memset(buf, '#', sizeof buf);
        CHECK_MPI(MPI_Info_get_string(info, "key2", &buflen, buf, &flag));
        CHECK(flag == 1 && strcmp(buf, long_val) == 0, "get_string: flag %d '%s'", flag, buf);
        CHECK(buflen == (int)strlen(long_val) + 1, "get_string buflen out %d, expected %zu",
              buflen, strlen(long_val) + 1);
        /* too small: truncated to buflen-1 chars, buflen out is the full size */
        memset(buf, '#', sizeof buf);
        buflen = 5;
        flag = -1;
        CHECK_MPI(MPI_Info_get_string(info, "key2", &buflen, buf, &flag));
        CHECK(flag == 1 && memcmp(buf, "a lo", 4) == 0 && buf[4] == '\0',
              "truncated get_string: '%.4s' [4]=%d", buf, buf[4]);
        CHECK(buf[5] == '#', "get_string wrote past buflen");
        CHECK(buflen == (int)strlen(long_val) + 1, "truncated get_string buflen out %d", buflen);
        /* buflen 0: value untouched, length reported */
        memset(buf, '#', sizeof buf);
        buflen = 0;
        flag = -1;
        CHECK_MPI(MPI_Info_get_string(info, "key2", &buflen, buf, &flag));
        CHECK(flag == 1 && buflen == (int)strlen(long_val) + 1 && buf[0] == '#',
              "get_string buflen 0: flag %d buflen %d buf[0]=%d", flag, buflen, buf[0]);
        /* one-character value */
        buflen = sizeof buf;
        CHECK_MPI(MPI_Info_get_string(info, "third_key", &buflen, buf, &flag));
        CHECK(flag == 1 && buflen == 2 && strcmp(buf, "3") == 0, "get_string short: flag %d buflen %d",
              flag, buflen);
        /* missing key */
        buflen = sizeof buf;
        flag = -1;
        strcpy(buf, "untouched");
        CHECK_MPI(MPI_Info_get_string(info, "nope", &buflen, buf, &flag));
        CHECK(flag == 0 && strcmp(buf, "untouched") == 0, "get_string missing: flag %d", flag);
    }
#endif

    /* dup is an independent copy */
    MPI_Info dup = MPI_INFO_NULL;
    CHECK_MPI(MPI_Info_dup(info, &dup));
    CHECK(dup != MPI_INFO_NULL && dup != info, "Info_dup handle");
    CHECK_MPI(MPI_Info_set(info, "k1", "changed-after-dup"));
    CHECK_MPI(MPI_Info_set(info, "added", "x"));
    expect_value(dup, "k1", "replaced", "dup unaffected by set on original");
    MPI_Info_get_nkeys(dup, &n);
    CHECK(n == 3, "dup nkeys %d", n);
    CHECK(!has_key(dup, "added"), "key added to original appears in dup");

    /* delete */
    CHECK_MPI(MPI_Info_delete(info, "key2"));
    MPI_Info_get_nkeys(info, &n);
    CHECK(n == 3, "nkeys %d after delete (k1, third_key, added)", n);
    CHECK(!has_key(info, "key2"), "deleted key still enumerated");
    {
        int flag = -1;
        char buf[8];
        MPI_Info_get(info, "key2", 7, buf, &flag);
        CHECK(flag == 0, "deleted key still found");
    }
    CHECK_ERR_CLASS(MPI_Info_delete(info, "key2"), MPI_ERR_INFO_NOKEY);
    expect_value(dup, "key2", long_val, "dup keeps key deleted from original");

    /* key too long */
    {
        char longkey[MPI_MAX_INFO_KEY + 8];
        memset(longkey, 'k', sizeof longkey - 1);
        longkey[sizeof longkey - 1] = '\0';
        CHECK_ERR_CLASS(MPI_Info_set(info, longkey, "v"), MPI_ERR_INFO_KEY);
    }
    /* nthkey out of range */
    {
        char k[MPI_MAX_INFO_KEY + 1];
        MPI_Info_get_nkeys(info, &n);
        /* the standard does not name the class: accept ARG / INFO_KEY / INFO_NOKEY */
        int rc = MPI_Info_get_nthkey(info, n, k), cls = -1;
        MPI_Error_class(rc, &cls);
        CHECK(rc != MPI_SUCCESS && (cls == MPI_ERR_ARG || cls == MPI_ERR_INFO_KEY || cls == MPI_ERR_INFO_NOKEY),
              "Info_get_nthkey(n = nkeys): rc %d class %d", rc, cls);
    }

    CHECK_MPI(MPI_Info_free(&info));
    CHECK(info == MPI_INFO_NULL, "Info_free did not set INFO_NULL");
    CHECK_MPI(MPI_Info_free(&dup));
    CHECK(dup == MPI_INFO_NULL, "Info_free did not set INFO_NULL (dup)");

    /* MPI_INFO_ENV */
    CHECK(MPI_INFO_ENV != MPI_INFO_NULL, "MPI_INFO_ENV is MPI_INFO_NULL");
    {
        int ne = -1;
        CHECK_MPI(MPI_Info_get_nkeys(MPI_INFO_ENV, &ne));
        CHECK(ne >= 0, "INFO_ENV nkeys %d", ne);
        MPI_Info envdup;
        CHECK_MPI(MPI_Info_dup(MPI_INFO_ENV, &envdup));
        int nd = -1;
        MPI_Info_get_nkeys(envdup, &nd);
        CHECK(nd == ne, "dup of INFO_ENV has %d keys, original %d", nd, ne);
        MPI_Info_free(&envdup);
    }
#if MPI_VERSION >= 4
    {
        int ne = -1;
        CHECK_MPI(MPI_Info_get_nkeys(env_early, &ne));
        CHECK(ne >= 0, "Info_create_env nkeys %d", ne);
        MPI_Info_free(&env_early);
        MPI_Info e2 = MPI_INFO_NULL;
        CHECK_MPI(MPI_Info_create_env(0, NULL, &e2));
        CHECK(e2 != MPI_INFO_NULL, "Info_create_env(0, NULL) gave INFO_NULL");
        MPI_Info_free(&e2);
    }
#endif
    return check_finish("info");
}
