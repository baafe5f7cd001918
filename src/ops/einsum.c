/* einsum.c: shape inference of Einsum: the equation's terms (letters, at most one ellipsis
 * each, repeated letters for diagonals), its explicit or implicit output, the sizes every label
 * takes (broadcasting only within the ellipsis, as numpy has it), and the loops the kernels run. */
#include <ctype.h>
#include <string.h>

#include "einsum.h"

#define ELLIPSIS_LABEL 52

static int letter_label(char ch) {
    if (ch >= 'a' && ch <= 'z') return ch - 'a';
    if (ch >= 'A' && ch <= 'Z') return 26 + ch - 'A';
    return -1;
}

/* One term's labels: letters as 0..51, the ellipsis as ELLIPSIS_LABEL (kept as one entry). */
static graft_status parse_term(const ir_node *node, const char *s, size_t len, int *labels,
                               int *count, bool *has_ellipsis, graft_err *e) {
    *count = 0;
    *has_ellipsis = false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.') {
            if (*has_ellipsis || i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.')
                return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                                "equation term '%.*s': '.' only as one '...'", (int)len, s);
            *has_ellipsis = true;
            i += 2;
            labels[(*count)++] = ELLIPSIS_LABEL;
        } else if (letter_label(s[i]) >= 0) {
            labels[(*count)++] = letter_label(s[i]);
        } else {
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                            "equation term '%.*s' has '%c', expected letters and '...'", (int)len,
                            s, s[i]);
        }
        if (*count > GRAFT_MAX_DIMS)
            return op_error(node, e, GRAFT_E_UNSUPPORTED, "equation term '%.*s' is too long",
                            (int)len, s);
    }
    return GRAFT_OK;
}

/* The equation without spaces; *arrow points at "->" or NULL. */
static graft_status strip_equation(const ir_node *node, char *buf, size_t size, const char **arrow,
                                   graft_err *e) {
    const char *eq = attr_s(node, "equation", NULL);
    if (!eq) return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "attribute equation is missing");
    size_t n = 0;
    for (const char *c = eq; *c; c++)
        if (!isspace((unsigned char)*c)) {
            if (n + 1 >= size)
                return op_error(node, e, GRAFT_E_UNSUPPORTED, "the equation is too long");
            buf[n++] = *c;
        }
    buf[n] = '\0';
    *arrow = strstr(buf, "->");
    if (*arrow && strstr(*arrow + 2, "->"))
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "equation '%s' has two '->'", eq);
    return GRAFT_OK;
}

/* Records operand k's dimension d as label l, checking its size against the label's. */
static graft_status bind_label(const ir_node *node, einsum_plan *p, int k, int d, int l,
                               int64_t dim, bool broadcasts, graft_err *e) {
    p->op_label[k][d] = l;
    int64_t *have = &p->label_dim[l];
    if (dim < 0 || *have == dim) return GRAFT_OK;
    if (*have == -2 || (broadcasts && *have == 1)) {
        *have = dim;
        return GRAFT_OK;
    }
    if (*have == -1 || (broadcasts && dim == 1)) return GRAFT_OK;
    return op_error(node, e, GRAFT_E_SHAPE,
                    "operand %d's dimension %d has size %lld, but its label has size %lld", k, d,
                    (long long)dim, (long long)*have);
}

/* Operand k's term (s, len): its labels bound to the operand's dims. */
static graft_status plan_operand(const ir_node *node, const value_info *x, int k, const char *s,
                                 size_t len, einsum_plan *p, int *counts, int *ell_rank,
                                 graft_err *e) {
    int labels[GRAFT_MAX_DIMS + 1], count;
    bool ell;
    TRY(parse_term(node, s, len, labels, &count, &ell, e));
    int letters = count - (ell ? 1 : 0), rank = x->ndim, er = rank - letters;
    if (er < 0 || (!ell && er != 0))
        return op_error(node, e, GRAFT_E_SHAPE, "term '%.*s' does not fit operand %d of rank %d",
                        (int)len, s, k, rank);
    if (er > *ell_rank) *ell_rank = er;
    int d = 0;
    for (int i = 0; i < count; i++) {
        if (labels[i] != ELLIPSIS_LABEL) {
            counts[labels[i]]++;
            TRY(bind_label(node, p, k, d, labels[i], x->dims[d], false, e));
            d++;
            continue;
        }
        for (int j = 0; j < er; j++, d++) /* ellipsis dims align from the right */
            TRY(bind_label(node, p, k, d, ELLIPSIS_LABEL + GRAFT_MAX_DIMS - er + j, x->dims[d],
                           true, e));
    }
    p->op_ndim[k] = rank;
    return GRAFT_OK;
}

/* The inputs' terms, one per operand; *ell_rank: the most dims an ellipsis covers. */
static graft_status plan_inputs(const ir_node *node, const value_info *in, int n, const char *lhs,
                                size_t lhs_len, einsum_plan *p, bool *seen_once, int *ell_rank,
                                graft_err *e) {
    int counts[EINSUM_MAX_LABELS] = {0}, terms = 1;
    for (size_t i = 0; i < lhs_len; i++) terms += lhs[i] == ',';
    if (terms != n)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "the equation has %d input terms for %d operands", terms, n);
    *ell_rank = 0;
    const char *t = lhs, *stop = lhs + lhs_len;
    for (int k = 0; k < n; k++) {
        const char *end = memchr(t, ',', (size_t)(stop - t));
        if (!end) end = stop;
        TRY(plan_operand(node, &in[k], k, t, (size_t)(end - t), p, counts, ell_rank, e));
        t = end + 1;
    }
    for (int l = 0; l < 52; l++) seen_once[l] = counts[l] == 1;
    return GRAFT_OK;
}

static graft_status plan_output(const ir_node *node, const char *rhs, einsum_plan *p,
                                const bool *seen_once, const bool *used, int ell_rank,
                                graft_err *e) {
    int labels[GRAFT_MAX_DIMS + 1], count = 0;
    bool ell = false;
    if (rhs) {
        TRY(parse_term(node, rhs, strlen(rhs), labels, &count, &ell, e));
    } else { /* implicit: the ellipsis, then the letters seen once, in alphabetical order */
        labels[count++] = ELLIPSIS_LABEL;
        for (int l = 26; l < 52; l++) /* 'A'..'Z' sort before 'a'..'z' */
            if (seen_once[l]) labels[count++] = l;
        for (int l = 0; l < 26; l++)
            if (seen_once[l]) labels[count++] = l;
        ell = true;
    }
    if (rhs && !ell && ell_rank > 0)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "the output term '%s' has no '...' for the inputs' ellipsis dims", rhs);
    p->out_ndim = 0;
    for (int i = 0; i < count; i++) {
        int l = labels[i];
        if (l == ELLIPSIS_LABEL) {
            for (int j = 0; j < ell_rank; j++)
                p->out_label[p->out_ndim++] = ELLIPSIS_LABEL + GRAFT_MAX_DIMS - ell_rank + j;
            continue;
        }
        if (!used[l])
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                            "output label '%c' is in no input term",
                            l < 26 ? 'a' + l : 'A' + l - 26);
        for (int j = 0; j < p->out_ndim; j++)
            if (p->out_label[j] == l)
                return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                                "output label '%c' appears twice", l < 26 ? 'a' + l : 'A' + l - 26);
        if (p->out_ndim >= GRAFT_MAX_DIMS)
            return op_error(node, e, GRAFT_E_UNSUPPORTED, "the output has too many dims");
        p->out_label[p->out_ndim++] = l;
    }
    return GRAFT_OK;
}

graft_status einsum_make_plan(const ir_node *node, const value_info *in, int n, einsum_plan *p,
                              graft_err *e) {
    memset(p, 0, sizeof *p);
    if (n < 1 || n > EINSUM_MAX_OPERANDS)
        return op_error(node, e, GRAFT_E_UNSUPPORTED, "Einsum of %d operands (graft takes 1 to %d)",
                        n, EINSUM_MAX_OPERANDS);
    char buf[512];
    const char *arrow = NULL;
    TRY(strip_equation(node, buf, sizeof buf, &arrow, e));
    for (int l = 0; l < EINSUM_MAX_LABELS; l++) p->label_dim[l] = -2; /* -2: not bound */
    p->n_operands = n;
    bool seen_once[52], used[EINSUM_MAX_LABELS];
    int ell_rank = 0;
    size_t lhs_len = arrow ? (size_t)(arrow - buf) : strlen(buf);
    TRY(plan_inputs(node, in, n, buf, lhs_len, p, seen_once, &ell_rank, e));
    for (int l = 0; l < EINSUM_MAX_LABELS; l++) used[l] = p->label_dim[l] != -2;
    for (int k = 0; k < n; k++) /* labels bound only to unknown dims */
        for (int d = 0; d < p->op_ndim[k]; d++) used[p->op_label[k][d]] = true;
    TRY(plan_output(node, arrow ? arrow + 2 : NULL, p, seen_once, used, ell_rank, e));
    for (int l = 0; l < EINSUM_MAX_LABELS; l++)
        if (p->label_dim[l] == -2) p->label_dim[l] = -1;
    p->n_labels = EINSUM_MAX_LABELS;
    return GRAFT_OK;
}

graft_status op_infer_Einsum(const ir_node *node, const value_info *in, int n_in, value_info *out,
                             int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 1, EINSUM_MAX_OPERANDS, n_out, 1, 1, e));
    for (int k = 0; k < n_in; k++) {
        graft_dtype dt = in[k].dtype;
        if (dt == GRAFT_DTYPE_BOOL)
            return op_error(node, e, GRAFT_E_DTYPE, "operand %d is bool, expected numbers", k);
        if (dt && in[0].dtype && dt != in[0].dtype)
            return op_error(node, e, GRAFT_E_DTYPE, "operand %d has dtype %s but operand 0 has %s",
                            k, graft_dtype_name(dt), graft_dtype_name(in[0].dtype));
    }
    op_unknown(&out[0], in[0].dtype);
    for (int k = 0; k < n_in; k++)
        if (in[k].ndim < 0) return GRAFT_OK;
    einsum_plan p;
    TRY(einsum_make_plan(node, in, n_in, &p, e));
    out[0].ndim = p.out_ndim;
    for (int d = 0; d < p.out_ndim; d++) out[0].dims[d] = p.label_dim[p.out_label[d]];
    return GRAFT_OK;
}

void einsum_make_loops(const einsum_plan *p, const int *op_ndim, const int64_t *const *op_dims,
                       einsum_loops *L) {
    memset(L, 0, sizeof *L);
    int slot[EINSUM_MAX_LABELS];
    for (int l = 0; l < EINSUM_MAX_LABELS; l++) slot[l] = -1;
    for (int d = 0; d < p->out_ndim; d++) {
        slot[p->out_label[d]] = L->n_all;
        L->dims[L->n_all++] = p->label_dim[p->out_label[d]];
    }
    L->n_out = L->n_all;
    for (int k = 0; k < p->n_operands; k++)
        for (int d = 0; d < p->op_ndim[k]; d++) {
            int l = p->op_label[k][d];
            if (slot[l] < 0) {
                slot[l] = L->n_all;
                L->dims[L->n_all++] = p->label_dim[l];
            }
        }
    for (int k = 0; k < p->n_operands; k++) {
        int64_t stride = 1;
        for (int d = op_ndim[k] - 1; d >= 0; d--) {
            int l = p->op_label[k][d];
            if (op_dims[k][d] == p->label_dim[l]) L->strides[k][slot[l]] += stride;
            stride *= op_dims[k][d];
        }
    }
}
