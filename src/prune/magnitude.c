/* magnitude.c: unstructured pruning: magnitude (per layer or global, by radix selection) and 2:4.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prune.h"

/* A weight tensor pruning may change: the node that reads it and its data. */
typedef struct mag_layer {
    int node;
    float *w;
    int64_t n;
} mag_layer;

/* The ordering key of |x|: the bits of x with the sign cleared. For non-negative floats the bit
 * patterns order as the values do; -0 and +0 share key 0 and NaN sorts above +inf (never pruned
 * before a number). */
static uint32_t mag_key(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u & 0x7fffffffu;
}

/* The weights pruning may change, in node order, each constant once. A constant read as the
 * weight of an excluded node stays untouched even when another node reads it too. */
static graft_status collect(const ir_graph *g, const graft_prune_options *o, mag_layer **out,
                            int *count, graft_err *e) {
    *out = NULL;
    *count = 0;
    unsigned char *flag = calloc((size_t)g->n_values + 1, 1);
    mag_layer *L = malloc(sizeof *L * ((size_t)g->n_nodes + 1));
    if (!flag || !L) {
        free(flag), free(L);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "prune: out of memory listing weights");
    }
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].dead || !prune_is_weight(g, i, 1)) continue;
        int v = g->nodes[i].inputs[1];
        if (prune_excluded(g, i, o))
            flag[v] = 2; /* blocked */
        else if (flag[v] == 0)
            flag[v] = 1; /* eligible */
    }
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].dead || !prune_is_weight(g, i, 1)) continue;
        int v = g->nodes[i].inputs[1];
        if (flag[v] != 1) continue;
        flag[v] = 3; /* taken */
        tensor *t = &g->values[v].data;
        L[n++] = (mag_layer){i, t->data, tensor_numel(t)};
    }
    free(flag);
    *out = L;
    *count = n;
    return GRAFT_OK;
}

/* Radix selection in three passes over the 31-bit keys (10, 11 and 10 bits): no copy of the
 * weights and no sort, O(n) whatever the values. Finds the key of the rank-th smallest |w|
 * (1-based) among the layers' weights and *need, how many of the weights with exactly that key
 * are among the rank smallest. */
static graft_status select_key(const mag_layer *L, int nl, int64_t rank, uint32_t *key,
                               int64_t *need, graft_err *e) {
    static const int shift[3] = {21, 10, 0}, width[3] = {10, 11, 10};
    int64_t *hist = malloc(sizeof(int64_t) << 11);
    if (!hist) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "prune: out of memory selecting");
    uint32_t prefix = 0;
    for (int p = 0; p < 3; p++) {
        int above = shift[p] + width[p];
        uint32_t bins = 1u << width[p], mask = bins - 1;
        memset(hist, 0, sizeof(int64_t) * bins);
        for (int l = 0; l < nl; l++)
            for (int64_t k = 0; k < L[l].n; k++) {
                uint32_t u = mag_key(L[l].w[k]);
                if (above < 32 && (u >> above) != (prefix >> above)) continue;
                hist[(u >> shift[p]) & mask]++;
            }
        int64_t cum = 0;
        uint32_t b = 0;
        while (b + 1 < bins && cum + hist[b] < rank) cum += hist[b++];
        rank -= cum;
        prefix |= b << shift[p];
    }
    free(hist);
    *key = prefix;
    *need = rank;
    return GRAFT_OK;
}

/* Zero the `rank` smallest |w| of the layers together; ties go to the earlier layer, then to the
 * lower index. Weights already zero are the smallest, so they count toward the rank. */
static graft_status zero_smallest(const mag_layer *L, int nl, int64_t rank, graft_err *e) {
    if (rank <= 0) return GRAFT_OK;
    uint32_t key = 0;
    int64_t need = 0;
    TRY(select_key(L, nl, rank, &key, &need, e));
    for (int l = 0; l < nl; l++)
        for (int64_t k = 0; k < L[l].n; k++) {
            uint32_t u = mag_key(L[l].w[k]);
            if (u < key || (u == key && need-- > 0)) L[l].w[k] = 0.0f;
        }
    return GRAFT_OK;
}

/* The fraction of the layers' weights that are zero. */
static double zero_fraction(const mag_layer *L, int nl) {
    int64_t zeros = 0, total = 0;
    for (int l = 0; l < nl; l++) {
        total += L[l].n;
        for (int64_t k = 0; k < L[l].n; k++) zeros += L[l].w[k] == 0.0f;
    }
    return total ? (double)zeros / (double)total : 0;
}

/* Zero the round(sparsity * n) smallest |w| of every weight (per layer), or of all weights taken
 * together (o->global). A weight that already has more zeros than that keeps them all: pruning
 * never revives a weight, so gradual rounds (0.3, then 0.6) only add zeros. */
graft_status prune_magnitude(ir_graph *g, const graft_prune_options *o, graft_prune_report *r,
                             graft_err *e) {
    mag_layer *L;
    int nl;
    TRY(collect(g, o, &L, &nl, e));
    graft_status st = GRAFT_OK;
    if (o->global) {
        int64_t total = 0;
        for (int l = 0; l < nl; l++) total += L[l].n;
        st = zero_smallest(L, nl, llround(o->sparsity * (double)total), e);
    } else {
        for (int l = 0; l < nl && st == GRAFT_OK; l++)
            st = zero_smallest(&L[l], 1, llround(o->sparsity * (double)L[l].n), e);
    }
    if (r) r->sparsity = zero_fraction(L, nl);
    free(L);
    return st;
}

/* ---- 2:4 ------------------------------------------------------------------------------------ */

/* A weight seen as its GEMM: element (a, k, b) at a*K*B + k*B + b, with k the reduction (input)
 * index. 2:4 groups four consecutive k of one (a, b): the K dimension of the GEMM is the one
 * NVIDIA's sparse tensor cores compress.
 *   Gemm transB=1: B is (N, K): A = N outputs, B = 1 (each row is one output's inputs).
 *   Gemm transB=0: B is (K, N): A = 1, B = N (each column is one output's inputs).
 *   MatMul B (..., K, N): A = the batch dims' product, B = N.
 *   Conv W (O, C/group, k...): A = O, K = C/group, B = the kernel positions' product. As an
 *     implicit GEMM the reduction runs over C/group x kernel positions; the groups are four
 *     consecutive input channels at one kernel position, the channels-last (NHWC) order that
 *     cuDNN, TensorRT and NVIDIA's ASP use for sparse convolutions (ASP permutes the weight to
 *     (kH, kW, O, C) and groups along C). */
typedef struct nm_layout {
    int64_t A, K, B;
} nm_layout;

static bool layout_of(const ir_graph *g, int node, nm_layout *lay) {
    const ir_node *n = &g->nodes[node];
    const tensor *w = &g->values[n->inputs[1]].data;
    int64_t inner = 1;
    if (!strcmp(n->op_type, "Gemm")) {
        if (w->ndim != 2) return false;
        bool tb = attr_i(n, "transB", 0) != 0;
        *lay = tb ? (nm_layout){w->dims[0], w->dims[1], 1} : (nm_layout){1, w->dims[0], w->dims[1]};
        return true;
    }
    if (!strcmp(n->op_type, "MatMul")) {
        if (w->ndim < 2) return false;
        for (int d = 0; d < w->ndim - 2; d++) inner *= w->dims[d];
        *lay = (nm_layout){inner, w->dims[w->ndim - 2], w->dims[w->ndim - 1]};
        return true;
    }
    if (w->ndim < 3) return false; /* Conv */
    for (int d = 2; d < w->ndim; d++) inner *= w->dims[d];
    *lay = (nm_layout){w->dims[0], w->dims[1], inner};
    return true;
}

/* Keep the two largest |w| of the group (ties: the lower k), zero the rest. A last group shorter
 * than four (K not a multiple of 4) is read as padded with zeros to four: it keeps min(len, 2),
 * so a group of 3 loses one weight and shorter ones none. */
static void nm_group(float *w, int64_t stride, int len) {
    if (len <= 2) return;
    int best = 0, second = -1;
    for (int i = 1; i < len; i++)
        if (mag_key(w[i * stride]) > mag_key(w[best * stride])) best = i;
    for (int i = 0; i < len; i++)
        if (i != best && (second < 0 || mag_key(w[i * stride]) > mag_key(w[second * stride])))
            second = i;
    for (int i = 0; i < len; i++)
        if (i != best && i != second) w[i * stride] = 0.0f;
}

static void nm_apply(float *w, nm_layout lay) {
    for (int64_t a = 0; a < lay.A; a++)
        for (int64_t b = 0; b < lay.B; b++) {
            float *line = w + a * lay.K * lay.B + b;
            for (int64_t k = 0; k < lay.K; k += 4)
                nm_group(line + k * lay.B, lay.B, (int)(lay.K - k < 4 ? lay.K - k : 4));
        }
}

/* 2:4 semi-structured sparsity on every Conv/Gemm/MatMul weight the options do not exclude
 * (o->sparsity is not used: half of every group goes). */
graft_status prune_2_4(ir_graph *g, const graft_prune_options *o, graft_prune_report *r,
                       graft_err *e) {
    mag_layer *L;
    int nl;
    TRY(collect(g, o, &L, &nl, e));
    for (int l = 0; l < nl; l++) {
        nm_layout lay;
        if (layout_of(g, L[l].node, &lay)) nm_apply(L[l].w, lay);
    }
    if (r) r->sparsity = zero_fraction(L, nl);
    free(L);
    return GRAFT_OK;
}
