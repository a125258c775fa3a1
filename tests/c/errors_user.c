/* ranks: 1 2 */
/* The application's error classes and codes (MPI 4.1 section 9.5): MPI_Add_error_class/code
   give values above MPI_ERR_LASTCODE, each new one above the last, and the MPI_LASTUSEDCODE
   attribute follows them; MPI_Error_class maps a code to its class and a class to itself;
   MPI_Error_string gives the string set with MPI_Add_error_string, and "" for a class or code
   with none; MPI_Remove_error_string/code/class (MPI 4.1) take them away again (a removed
   value is no longer an error code, a class with codes left, or a class or
   code whose string is still set, cannot go; predefined ones never);
   a code of the application's passes through MPI_Comm_call_errhandler unchanged. */
#include "check.h"

static int last_used(void)
{
    int *v = NULL, flag = 0;
    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &v, &flag));
    CHECK(flag && v, "MPI_LASTUSEDCODE not set on MPI_COMM_WORLD");
    return flag && v ? *v : -1;
}

static void string_is(int code, const char *want)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = -1;
    memset(s, 'x', sizeof s);
    CHECK_MPI(MPI_Error_string(code, s, &len));
    CHECK(len == (int)strlen(want) && strcmp(s, want) == 0, "Error_string(%d) = \"%.60s\" (len %d), expected \"%s\"",
          code, s, len, want);
}

static int class_of(int code)
{
    int cls = -1;
    CHECK_MPI(MPI_Error_class(code, &cls));
    return cls;
}

static int seen_code = -1;
static void handler(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    seen_code = *code;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);

    int before = last_used();
    CHECK(before >= MPI_ERR_LASTCODE, "MPI_LASTUSEDCODE %d below MPI_ERR_LASTCODE %d", before, MPI_ERR_LASTCODE);

    int cls, code, code2, cls2;
    CHECK_MPI(MPI_Add_error_class(&cls));
    CHECK(cls > MPI_ERR_LASTCODE, "new class %d not above MPI_ERR_LASTCODE %d", cls, MPI_ERR_LASTCODE);
    CHECK(cls > before, "new class %d not above MPI_LASTUSEDCODE %d", cls, before);
    CHECK(last_used() == cls, "MPI_LASTUSEDCODE %d after Add_error_class gave %d", last_used(), cls);
    CHECK_MPI(MPI_Add_error_code(cls, &code));
    CHECK(code > cls, "new code %d not above class %d", code, cls);
    CHECK(last_used() == code, "MPI_LASTUSEDCODE %d after Add_error_code gave %d", last_used(), code);
    CHECK_MPI(MPI_Add_error_code(MPI_ERR_ARG, &code2));
    CHECK(code2 > code && last_used() == code2, "code %d on MPI_ERR_ARG, MPI_LASTUSEDCODE %d", code2, last_used());
    CHECK_MPI(MPI_Add_error_class(&cls2));
    CHECK(cls2 > code2, "class %d after code %d", cls2, code2);

    CHECK(class_of(cls) == cls, "Error_class of a class is not itself");
    CHECK(class_of(code) == cls, "Error_class(code) = %d, expected %d", class_of(code), cls);
    CHECK(class_of(code2) == MPI_ERR_ARG, "Error_class(code on MPI_ERR_ARG) = %d", class_of(code2));

    /* no string set: "" */
    string_is(cls, "");
    string_is(code, "");
    CHECK_MPI(MPI_Add_error_string(cls, "the class"));
    CHECK_MPI(MPI_Add_error_string(code, "the code"));
    string_is(cls, "the class");
    string_is(code, "the code");
    CHECK_MPI(MPI_Add_error_string(code, "the code again"));
    string_is(code, "the code again");
    CHECK_ERR_CLASS(MPI_Add_error_string(MPI_ERR_ARG, "predefined"), MPI_ERR_ARG);

    /* a code of the application's reaches a handler unchanged */
    MPI_Errhandler eh;
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    CHECK_MPI(MPI_Comm_create_errhandler(handler, &eh));
    CHECK_MPI(MPI_Comm_set_errhandler(dup, eh));
    CHECK_MPI(MPI_Comm_call_errhandler(dup, code));
    CHECK(seen_code == code, "handler saw %d, expected %d", seen_code, code);
    MPI_Errhandler_free(&eh);
    MPI_Comm_free(&dup);

    /* removal */
    CHECK_ERR_CLASS(MPI_Remove_error_class(cls), MPI_ERR_ARG); /* code still on it */
    CHECK_ERR_CLASS(MPI_Remove_error_class(MPI_ERR_ARG), MPI_ERR_ARG);
    CHECK_ERR_CLASS(MPI_Remove_error_code(MPI_ERR_OTHER), MPI_ERR_ARG);
    CHECK_ERR_CLASS(MPI_Remove_error_code(cls), MPI_ERR_ARG); /* a class, not a code */
    CHECK_ERR_CLASS(MPI_Remove_error_string(MPI_ERR_ARG), MPI_ERR_ARG);
    CHECK_ERR_CLASS(MPI_Remove_error_code(code), MPI_ERR_ARG); /* its string is still set */
    CHECK_MPI(MPI_Remove_error_string(code));
    string_is(code, "");
    CHECK_ERR_CLASS(MPI_Remove_error_string(code), MPI_ERR_ARG); /* no string left to remove */
    CHECK(class_of(code) == cls, "code lost its class when its string went");
    CHECK_MPI(MPI_Remove_error_code(code));
    int c = -1;
    CHECK_ERR_CLASS(MPI_Error_class(code, &c), MPI_ERR_ARG);
    CHECK_ERR_CLASS(MPI_Add_error_string(code, "gone"), MPI_ERR_ARG);
    CHECK_ERR_CLASS(MPI_Remove_error_code(code), MPI_ERR_ARG);
    CHECK_ERR_CLASS(MPI_Remove_error_class(cls), MPI_ERR_ARG); /* its string is still set */
    CHECK_MPI(MPI_Remove_error_string(cls));
    CHECK_MPI(MPI_Remove_error_class(cls));
    CHECK_ERR_CLASS(MPI_Error_class(cls, &c), MPI_ERR_ARG);
    CHECK_ERR_CLASS(MPI_Add_error_code(cls, &c), MPI_ERR_ARG);
    CHECK_MPI(MPI_Remove_error_code(code2));
    CHECK_MPI(MPI_Remove_error_class(cls2));
    /* values are not reused: the next class is above every earlier one */
    int cls3;
    CHECK_MPI(MPI_Add_error_class(&cls3));
    CHECK(cls3 > cls2 && last_used() == cls3, "class %d after removals (last %d), MPI_LASTUSEDCODE %d", cls3, cls2,
          last_used());
    CHECK_MPI(MPI_Remove_error_class(cls3));
    /* the predefined classes keep their strings */
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    CHECK_MPI(MPI_Error_string(MPI_ERR_ARG, s, &len));
    CHECK(len > 0, "MPI_ERR_ARG has an empty string");
    return check_finish("errors_user");
}
