/* ranks: 1 2 3 4 8 */
/* timeout: 120 */
/* MPI_Accumulate, MPI_Raccumulate, MPI_Get_accumulate and
   MPI_Rget_accumulate (and their _c forms, MPI 4.0 and later) on windows
   from MPI_Win_allocate (disp_unit 8) and MPI_Win_create (disp_unit 1).

   Every predefined operation on every type it is defined for (signed char,
   short, int, long, long long, unsigned, unsigned long, byte, float, double,
   double complex, the MINLOC/MAXLOC pair types), plus REPLACE and NO_OP, and
   derived datatypes built from one basic type on both sides (vector against
   indexed, contiguous against vector, resized with holes). Each epoch runs
   every such case, each in its own region of the window:
   - all ranks accumulate into one target at once (fence, exclusive lock,
     shared lock, lock_all; Raccumulate with Waitall and with Test): the target
     must hold its initial value combined with every rank's contribution;
   - each rank accumulates into the next (REPLACE included) or fetches with
     Get_accumulate/Rget_accumulate (NO_OP included): the result buffer must
     get the target's old values, the target the combined ones.
   Regions carry guard bytes, the pair types padding and the derived types
   holes: the whole window and result buffer must equal the computed image.
   Concurrency and ordering are in rma_accumulate_order.c. */
#include "rma_ops_util.h"
#include "rma_values.h"

#define AC_GUARD 16

/* Layouts in units of the basic type: the positions one item covers (in
   type-map order) and its extent. */
enum { L_BASIC, L_VECTOR, L_INDEXED, L_RESIZED, L_CONTIG6, L_VEC2, L_VEC12, L_COUNT };
static const struct {
    int n, pos[6], extent;
} LAY[L_COUNT] = {
    {1, {0}, 1},
    {6, {0, 1, 5, 6, 10, 11}, 12}, /* vector(3, 2, 5) */
    {6, {0, 2, 3, 4, 7, 8}, 9},    /* indexed({1,3,2}, {0,2,7}) */
    {2, {0, 1}, 3},                /* contiguous(2) resized to 3 elements */
    {6, {0, 1, 2, 3, 4, 5}, 6},    /* contiguous(6) */
    {6, {0, 1, 2, 4, 5, 6}, 7},    /* vector(2, 3, 4) */
    {2, {0, 2}, 3},                /* vector(2, 1, 2) */
};

static MPI_Datatype ac_make_type(int lay, int bt)
{
    MPI_Datatype b = RV[bt].type, t = b, u;
    switch (lay) {
    case L_BASIC: return b;
    case L_VECTOR: MPI_Type_vector(3, 2, 5, b, &t); break;
    case L_INDEXED: MPI_Type_indexed(3, (int[]){1, 3, 2}, (int[]){0, 2, 7}, b, &t); break;
    case L_RESIZED:
        MPI_Type_contiguous(2, b, &u);
        MPI_Type_create_resized(u, 0, 3 * (MPI_Aint)RV[bt].size, &t);
        MPI_Type_free(&u);
        break;
    case L_CONTIG6: MPI_Type_contiguous(6, b, &t); break;
    case L_VEC2: MPI_Type_vector(2, 3, 4, b, &t); break;
    case L_VEC12: MPI_Type_vector(2, 1, 2, b, &t); break;
    }
    MPI_Type_commit(&t);
    return t;
}

typedef struct {
    int bt, ol, tl, oc, tc;
    MPI_Op op;
    MPI_Datatype otype, ttype;
    size_t oreg, treg; /* byte offsets of the origin and target addresses */
    size_t ostart, tstart, oend, tend;
} ac_kind;

static ac_kind K[160];
static int nk;
static size_t ac_osize, ac_tsize;
static unsigned char *ac_obuf, *ac_rbuf, *ac_init, *ac_expect, *ac_rexpect;

static size_t ac_slot(int lay, int s) /* element offset of signature element s */
{
    return (size_t)(s / LAY[lay].n) * (size_t)LAY[lay].extent +
           (size_t)LAY[lay].pos[s % LAY[lay].n];
}

static int ac_nsig(const ac_kind *k) { return k->oc * LAY[k->ol].n; }

static void ac_add(int bt, MPI_Op op, int ol, int oc, int tl, int tc)
{
    ac_kind *k = &K[nk++];
    k->bt = bt;
    k->op = op;
    k->ol = ol;
    k->tl = tl;
    k->oc = oc;
    k->tc = tc;
    k->otype = ac_make_type(ol, bt);
    k->ttype = ac_make_type(tl, bt);
    size_t es = (size_t)RV[bt].size;
    k->ostart = ac_osize;
    k->oreg = k->ostart + AC_GUARD;
    k->oend = k->oreg + (size_t)(oc * LAY[ol].extent) * es + AC_GUARD;
    ac_osize = (k->oend + 15) & ~(size_t)15;
    k->tstart = ac_tsize;
    k->treg = k->tstart + AC_GUARD;
    k->tend = k->treg + (size_t)(tc * LAY[tl].extent) * es + AC_GUARD;
    ac_tsize = (k->tend + 15) & ~(size_t)15;
}

static void ac_kinds_init(void)
{
    static const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_LAND, MPI_LOR,
                                 MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR, MPI_MAXLOC, MPI_MINLOC,
                                 MPI_REPLACE, MPI_NO_OP};
    for (int bt = 0; bt < B_NTYPES; bt++)
        for (int o = 0; o < (int)(sizeof ops / sizeof ops[0]); o++)
            if (rv_op_valid(bt, ops[o]))
                ac_add(bt, ops[o], L_BASIC, 5, L_BASIC, 5);
    ac_add(B_INT, MPI_SUM, L_VECTOR, 2, L_INDEXED, 2);
    ac_add(B_DOUBLE, MPI_MAX, L_CONTIG6, 2, L_VEC2, 2);
    ac_add(B_UNSIGNED, MPI_BXOR, L_RESIZED, 3, L_CONTIG6, 1);
    ac_add(B_LLONG, MPI_REPLACE, L_INDEXED, 2, L_RESIZED, 6);
    ac_add(B_2INT, MPI_MAXLOC, L_CONTIG6, 1, L_VEC12, 3);
    ac_add(B_DOUBLE_INT, MPI_MINLOC, L_RESIZED, 3, L_INDEXED, 1);
    ac_add(B_FLOAT, MPI_SUM, L_VEC12, 3, L_BASIC, 6);
    ac_add(B_LONG, MPI_NO_OP, L_VECTOR, 1, L_VEC2, 1);
}

/* Values: small, so every combination is exact and in range. */
static rv_val ac_mk(int bt, long long n, double im, int loc)
{
    rv_val v = {n, (double)n, im, loc};
    int c = RV[bt].cls;
    if (c == C_UINT && n < 0 && v.i > -1000)
        v.i = n + 100;
    if (c == C_BYTE)
        v.i = n & 0xff;
    return rv_norm(bt, v);
}

static rv_val ac_contrib(const ac_kind *k, int r, int s)
{
    int bt = k->bt, c = RV[bt].cls;
    MPI_Op op = k->op;
    if (op == MPI_SUM)
        return ac_mk(bt, ((r * 7 + s * 3 + 5) % 11) - 5, (r + s) % 3 - 1, 0);
    if (op == MPI_PROD) {
        if (c == C_COMPLEX)
            return ac_mk(bt, (r + s) % 3 != 1, (r + s) % 3 != 2, 0);
        int m = (r + s) % 4;
        return ac_mk(bt, m == 0 ? 2 : (m == 1 && c != C_UINT) ? -1 : 1, 0, 0);
    }
    if (op == MPI_MAX || op == MPI_MIN) {
        rv_val v = ac_mk(bt, ((r * 37 + s * 11) % 101) - 50, 0, 0);
        v.re += 0.25;
        return v;
    }
    if (op == MPI_LAND || op == MPI_LXOR)
        return ac_mk(bt, (r + 2 * s) % 5 == 3 ? 0 : (r + s) % 3 + 1, 0, 0);
    if (op == MPI_LOR)
        return ac_mk(bt, (r + s) % 4 == 0 ? 2 : 0, 0, 0);
    if (op == MPI_BAND)
        return ac_mk(bt, ~(1LL << ((r + s) % 8)), 0, 0);
    if (op == MPI_BOR)
        return ac_mk(bt, 1LL << ((r + 3 * s) % 8), 0, 0);
    if (op == MPI_BXOR)
        return ac_mk(bt, r * 0x35 + s * 0x1b + 0x5a, 0, 0);
    if (op == MPI_MAXLOC || op == MPI_MINLOC) {
        rv_val v = ac_mk(bt, (r * 5 + s * 3) % 7, 0, r * 16 + s);
        v.re += 0.5;
        return rv_norm(bt, v);
    }
    return ac_mk(bt, (r * 13 + s * 7 + 3) % 100, r, r); /* REPLACE, NO_OP */
}

static rv_val ac_initval(const ac_kind *k, int p)
{
    int bt = k->bt;
    MPI_Op op = k->op;
    if (op == MPI_SUM)
        return ac_mk(bt, (p * 5) % 13 - 6, p % 3, 0);
    if (op == MPI_PROD)
        return ac_mk(bt, (p % 3 == 0 && RV[bt].cls != C_UINT) ? -1 : 1, p % 2, 0);
    if (op == MPI_MAX || op == MPI_MIN)
        return ac_mk(bt, (p * 23) % 101 - 50, 0, 0);
    if (op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR)
        return ac_mk(bt, p % 3, 0, 0);
    if (op == MPI_BAND)
        return ac_mk(bt, ~(1LL << (p % 8)), 0, 0);
    if (op == MPI_BOR)
        return ac_mk(bt, (p * 0x11) & 0x0f, 0, 0);
    if (op == MPI_BXOR)
        return ac_mk(bt, p * 0x2f + 0xc3, 0, 0);
    if (op == MPI_MAXLOC || op == MPI_MINLOC)
        return ac_mk(bt, (p * 3) % 7, 0, 1000 + p);
    return ac_mk(bt, -(p + 1) * 3, -p, 2000 + p);
}

/* The window's initial image: every element slot of every region (guards
   and holes included) holds the kind's initial value; pair padding 0xee. */
static void ac_build_init(void)
{
    memset(ac_init, 0xee, ac_tsize);
    for (int i = 0; i < nk; i++) {
        size_t es = (size_t)RV[K[i].bt].size;
        for (size_t off = K[i].tstart, p = 0; off + es <= K[i].tend; off += es, p++)
            rv_store(K[i].bt, ac_init + off, ac_initval(&K[i], (int)p));
    }
}

enum { P_ALL, P_RING };
/* A_C marks the _c (MPI_Count) form of a call. */
enum { A_ACC, A_RACC, A_GACC, A_RGACC, A_C = 4 };
static const char *ac_call_names[] = {"Accumulate",   "Raccumulate",   "Get_accumulate",
                                      "Rget_accumulate", "Accumulate_c", "Raccumulate_c",
                                      "Get_accumulate_c", "Rget_accumulate_c"};

static int ac_issue(const ac_kind *k, int call, int target, const rma_win *w, MPI_Request *rq)
{
    void *o = ac_obuf + k->oreg, *res = ac_rbuf + k->oreg;
    MPI_Aint d = (MPI_Aint)(k->treg / (size_t)w->disp_unit);
    MPI_Datatype ot = k->otype, tt = k->ttype;
    switch (call) {
    case A_ACC: return MPI_Accumulate(o, k->oc, ot, target, d, k->tc, tt, k->op, w->win);
    case A_RACC: return MPI_Raccumulate(o, k->oc, ot, target, d, k->tc, tt, k->op, w->win, rq);
    case A_GACC:
        return MPI_Get_accumulate(o, k->oc, ot, res, k->oc, ot, target, d, k->tc, tt, k->op,
                                  w->win);
    case A_RGACC:
        return MPI_Rget_accumulate(o, k->oc, ot, res, k->oc, ot, target, d, k->tc, tt, k->op,
                                   w->win, rq);
#if MPI_VERSION >= 4
    case A_C + A_ACC: return MPI_Accumulate_c(o, k->oc, ot, target, d, k->tc, tt, k->op, w->win);
    case A_C + A_RACC:
        return MPI_Raccumulate_c(o, k->oc, ot, target, d, k->tc, tt, k->op, w->win, rq);
    case A_C + A_GACC:
        return MPI_Get_accumulate_c(o, k->oc, ot, res, k->oc, ot, target, d, k->tc, tt, k->op,
                                    w->win);
    case A_C + A_RGACC:
        return MPI_Rget_accumulate_c(o, k->oc, ot, res, k->oc, ot, target, d, k->tc, tt, k->op,
                                     w->win, rq);
#endif
    default: return MPI_ERR_OTHER;
    }
}

static int ac_included(const ac_kind *k, int pat, int call)
{
    if (k->op == MPI_NO_OP)
        return (call & 3) == A_GACC || (call & 3) == A_RGACC;
    if (k->op == MPI_REPLACE)
        return pat == P_RING;
    return 1;
}

/* Byte comparison, except that real and complex values compare as numbers:
   the sign of a zero product depends on the order of the factors. */
static void ac_compare(const unsigned char *got, const unsigned char *exp, size_t n,
                       int origin_side, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (got[i] == exp[i])
            continue;
        int j = 0;
        for (; j < nk; j++)
            if (i >= (origin_side ? K[j].ostart : K[j].tstart) &&
                i < (origin_side ? K[j].oend : K[j].tend))
                break;
        if (j == nk) {
            RMA_CHECK(0, "%s: byte %zu outside every region changed", what, i);
            return;
        }
        const ac_kind *k = &K[j];
        size_t start = origin_side ? k->ostart : k->tstart;
        size_t es = (size_t)RV[k->bt].size;
        size_t el = start + (i - start) / es * es;
        rv_val g = rv_load(k->bt, got + el), e = rv_load(k->bt, exp + el);
        int c = RV[k->bt].cls;
        if ((c == C_REAL || c == C_COMPLEX) && g.re == e.re && g.im == e.im) {
            i = el + es - 1;
            continue;
        }
        char gs[64], es_[64];
        rv_format(k->bt, g, gs, sizeof gs);
        rv_format(k->bt, e, es_, sizeof es_);
        RMA_CHECK(0, "%s: %s %s (%s -> %s): byte %zu of region (element %zu%s): %s, expected %s",
                  what, RV[k->bt].name, check_op_name(k->op), LAY[k->ol].n > 1 ? "derived" : "basic",
                  LAY[k->tl].n > 1 ? "derived" : "basic", i - start, (i - start) / es,
                  i - start < AC_GUARD ? ", guard" : "", gs, es_);
        return;
    }
}

static void ac_epoch(const rma_win *w, int pat, int call, int sync, int done, int e)
{
    int target = pat == P_ALL ? e % rma_size : (rma_rank + 1) % rma_size;
    snprintf(rma_ctx, sizeof rma_ctx, "%s disp_unit %d, %s %s, %s%s", rma_flavor_name(w->flavor),
             w->disp_unit, ac_call_names[call], pat == P_ALL ? "all ranks to one" : "to next rank",
             rma_sync_name(sync), done == 1 ? ", Waitall" : done == 2 ? ", Test" : "");
    rma_local_begin(w, sync, 1);
    memcpy(w->base, ac_init, ac_tsize);
    rma_local_end(w, sync);
    memset(ac_obuf, 0x5c, ac_osize);
    memset(ac_rbuf, 0xa5, ac_osize);
    memset(ac_rexpect, 0xa5, ac_osize);
    for (int j = 0; j < nk; j++)
        for (int s = 0; s < ac_nsig(&K[j]); s++) {
            size_t es = (size_t)RV[K[j].bt].size;
            rv_store(K[j].bt, ac_obuf + K[j].oreg + ac_slot(K[j].ol, s) * es,
                     ac_contrib(&K[j], rma_rank, s));
            rv_store(K[j].bt, ac_rexpect + K[j].oreg + ac_slot(K[j].ol, s) * es,
                     rv_load(K[j].bt, ac_init + K[j].treg + ac_slot(K[j].tl, s) * es));
        }

    rma_epoch_open(w, sync, target);
    static MPI_Request req[160];
    int nreq = 0;
    for (int j = 0; j < nk; j++) {
        const ac_kind *k = &K[j];
        if (!ac_included(k, pat, call))
            continue;
        MPI_Request *rq = &req[nreq];
        *rq = MPI_REQUEST_NULL;
        int rc = ac_issue(k, call, target, w, rq);
        RMA_CHECK(rc == MPI_SUCCESS, "%s %s: returned %d", RV[k->bt].name, check_op_name(k->op), rc);
        nreq++;
    }
    if (done == 1) {
        RMA_MPI(MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE));
    } else if (done == 2) {
        for (int j = 0; j < nreq; j++)
            for (int flag = 0; !flag;)
                RMA_MPI(MPI_Test(&req[j], &flag, MPI_STATUS_IGNORE));
    }
    int fetch = (call & 3) == A_GACC || (call & 3) == A_RGACC;
    if (fetch && done)
        ac_compare(ac_rbuf, ac_rexpect, ac_osize, 1, "result buffer (old values)");
    rma_epoch_close(w, sync, target);
    if (fetch && !done)
        ac_compare(ac_rbuf, ac_rexpect, ac_osize, 1, "result buffer (old values)");

    if (pat == P_ALL && rma_rank != target)
        return;
    memcpy(ac_expect, ac_init, ac_tsize);
    for (int r = 0; r < rma_size; r++) {
        if (pat == P_RING && r != (rma_rank + rma_size - 1) % rma_size)
            continue;
        for (int j = 0; j < nk; j++) {
            const ac_kind *k = &K[j];
            if (!ac_included(k, pat, call))
                continue;
            size_t es = (size_t)RV[k->bt].size;
            for (int s = 0; s < ac_nsig(k); s++) {
                unsigned char *p = ac_expect + k->treg + ac_slot(k->tl, s) * es;
                rv_store(k->bt, p, rv_apply(k->bt, k->op, rv_load(k->bt, p), ac_contrib(k, r, s)));
            }
        }
    }
    rma_local_begin(w, sync, 0);
    ac_compare(w->base, ac_expect, ac_tsize, 0, "target window");
    rma_local_end(w, sync);
}

int main(int argc, char **argv)
{
    rma_init(&argc, &argv);
    rv_init();
    ac_kinds_init();
    ac_obuf = malloc(ac_osize);
    ac_rbuf = malloc(ac_osize);
    ac_rexpect = malloc(ac_osize);
    ac_init = malloc(ac_tsize);
    ac_expect = malloc(ac_tsize);
    ac_build_init();
    static const struct { int pat, call, sync, done; } E[] = {
        {P_ALL, A_ACC, RMA_FENCE, 0},         {P_ALL, A_ACC, RMA_LOCK_EXCL, 0},
        {P_ALL, A_ACC, RMA_LOCK_SHARED, 0},   {P_ALL, A_ACC, RMA_LOCK_ALL, 0},
        {P_ALL, A_RACC, RMA_LOCK_SHARED, 1},  {P_ALL, A_RACC, RMA_LOCK_ALL, 2},
        {P_RING, A_ACC, RMA_FENCE, 0},        {P_RING, A_RACC, RMA_LOCK_ALL, 1},
        {P_RING, A_GACC, RMA_FENCE, 0},       {P_RING, A_GACC, RMA_LOCK_EXCL, 0},
        {P_RING, A_GACC, RMA_LOCK_ALL, 0},    {P_RING, A_RGACC, RMA_LOCK_SHARED, 1},
        {P_RING, A_RGACC, RMA_LOCK_EXCL, 2},
#if MPI_VERSION >= 4
        {P_ALL, A_C + A_ACC, RMA_LOCK_SHARED, 0}, {P_ALL, A_C + A_RACC, RMA_LOCK_EXCL, 1},
        {P_RING, A_C + A_GACC, RMA_FENCE, 0},     {P_RING, A_C + A_RGACC, RMA_LOCK_ALL, 2},
#endif
    };
    int e = 0;
    for (int f = 0; f < RMA_NFLAVORS; f++) {
        if (rma_flavor_skipped(f))
            continue;
        rma_win w;
        snprintf(rma_ctx, sizeof rma_ctx, "%s", rma_flavor_name(f));
        rma_win_open(&w, f, (MPI_Aint)ac_tsize, f == RMA_ALLOCATE ? 8 : 1);
        for (int i = 0; i < (int)(sizeof E / sizeof E[0]); i++)
            ac_epoch(&w, E[i].pat, E[i].call, E[i].sync, E[i].done, e++);
        rma_win_close(&w);
    }
    for (int j = 0; j < nk; j++) {
        if (K[j].ol != L_BASIC)
            MPI_Type_free(&K[j].otype);
        if (K[j].tl != L_BASIC)
            MPI_Type_free(&K[j].ttype);
    }
    return check_finish("rma_accumulate");
}
