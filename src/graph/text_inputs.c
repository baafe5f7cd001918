/* text_inputs.c: which input of a text model takes the token ids, the attention mask and the
 * token type ids, told from what the graph does with each (names only break ties). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "text_inputs.h"

static const char *const ROLE_WORDS[GRAFT_TEXT_INPUT_COUNT] = {"token ids", "attention mask",
                                                               "token type ids"};

/* What the graph does with one input. */
typedef struct input_use {
    int64_t embedding_rows; /* rows of the largest constant table it indexes (0: none) */
    bool arithmetic;        /* it reaches an op other than a lookup or a shape query */
} input_use;

static bool is_op(const ir_node *n, const char *op) {
    return strcmp(n->op_type, op) == 0;
}

/* Ops that carry an input's values on unchanged (in type or layout only). */
static bool passes_values(const ir_node *n) {
    static const char *const ops[] = {"Cast",    "Reshape",  "Unsqueeze", "Squeeze",
                                      "Flatten", "Identity", "Expand"};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        if (is_op(n, ops[k])) return true;
    return false;
}

/* An embedding lookup: Gather (axis 0) of a constant 2-D table at the indices in input 1. */
static int64_t lookup_rows(const ir_graph *g, const ir_node *n, int indices) {
    if (!is_op(n, "Gather") || n->n_in < 2 || n->inputs[1] != indices || n->inputs[0] < 0 ||
        attr_i(n, "axis", 0) != 0)
        return 0;
    const ir_value *table = &g->values[n->inputs[0]];
    return table->is_const && table->ndim == 2 ? table->dims[0] : 0;
}

/* Follow input `in` forward through the (topologically ordered) nodes. */
static graft_status trace_input(const ir_graph *g, int in, input_use *use, graft_err *e) {
    bool *reached = calloc((size_t)g->n_values, sizeof *reached);
    if (!reached) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    reached[in] = true;
    memset(use, 0, sizeof *use);
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++) {
            int v = n->inputs[k];
            if (v < 0 || !reached[v]) continue;
            int64_t rows = lookup_rows(g, n, v);
            if (rows > 0) {
                if (rows > use->embedding_rows) use->embedding_rows = rows;
            } else if (passes_values(n) && k == 0) {
                for (int o = 0; o < n->n_out; o++)
                    if (n->outputs[o] >= 0) reached[n->outputs[o]] = true;
            } else if (!is_op(n, "Shape") && !is_op(n, "Size")) {
                use->arithmetic = true;
            }
        }
    }
    free(reached);
    return GRAFT_OK;
}

/* The role an input's name suggests (the exporters' usual names), or -1. */
static int role_of_name(const char *name) {
    char low[256];
    size_t i = 0;
    for (; name[i] && i + 1 < sizeof low; i++) low[i] = (char)tolower((unsigned char)name[i]);
    low[i] = 0;
    if (strstr(low, "mask")) return GRAFT_TEXT_INPUT_MASK;
    if (strstr(low, "type") || strstr(low, "segment")) return GRAFT_TEXT_INPUT_TYPE_IDS;
    if (strstr(low, "ids") || strstr(low, "input")) return GRAFT_TEXT_INPUT_IDS;
    return -1;
}

/* The role the graph gives input k: the largest lookup takes the ids, a smaller one the type
 * ids, arithmetic without a lookup the mask; -1 where the graph does not say, -2 where it
 * says ids but another input indexes an equally large table (a tie). */
static int role_of_use(const input_use *use, int n, int k) {
    int64_t largest = 0;
    int at_largest = 0;
    for (int j = 0; j < n; j++)
        if (use[j].embedding_rows > largest) largest = use[j].embedding_rows, at_largest = 0;
    for (int j = 0; j < n; j++) at_largest += largest > 0 && use[j].embedding_rows == largest;
    if (use[k].embedding_rows > 0 && use[k].embedding_rows == largest)
        return at_largest == 1 ? GRAFT_TEXT_INPUT_IDS : -2;
    if (use[k].embedding_rows > 0) return GRAFT_TEXT_INPUT_TYPE_IDS;
    return use[k].arithmetic ? GRAFT_TEXT_INPUT_MASK : -1;
}

/* An error naming every input, then what could not be decided. */
static graft_status undecided(const ir_graph *g, graft_err *e, const char *what) {
    char inputs[512];
    size_t at = 0;
    for (int i = 0; i < g->n_inputs; i++)
        at += (size_t)snprintf(inputs + at, at < sizeof inputs ? sizeof inputs - at : 0, "%s'%s'",
                               i ? ", " : "", g->values[g->inputs[i]].name);
    return err_set(e, GRAFT_E_INVALID_ARGUMENT, "text model inputs %s: %s", inputs, what);
}

/* Input k and input `other` both have role r: the one whose name says r keeps it, the other
 * takes the (free) role its name says. Returns 0, or -1 with `what` saying why not. */
static int settle_tie(const ir_graph *g, int roles[], int r, int k, char *what, size_t size) {
    int other = roles[r];
    const char *a = g->values[g->inputs[other]].name, *b = g->values[g->inputs[k]].name;
    bool a_named = role_of_name(a) == r, b_named = role_of_name(b) == r;
    if (a_named == b_named) {
        snprintf(what, size, "both '%s' and '%s' look like the %s", a, b, ROLE_WORDS[r]);
        return -1;
    }
    int loser = b_named ? other : k;
    if (b_named) roles[r] = k;
    int alt = role_of_name(g->values[g->inputs[loser]].name);
    if (alt < 0 || alt == r || roles[alt] >= 0) {
        snprintf(what, size, "'%s' takes the %s, and what '%s' takes cannot be told",
                 g->values[g->inputs[roles[r]]].name, ROLE_WORDS[r],
                 g->values[g->inputs[loser]].name);
        return -1;
    }
    roles[alt] = loser;
    return 0;
}

/* Give each input a role: its graph role, else its name's; a tie is settled by the names. */
static graft_status assign(const ir_graph *g, const input_use *use, int roles[], graft_err *e) {
    char what[400];
    for (int r = 0; r < GRAFT_TEXT_INPUT_COUNT; r++) roles[r] = -1;
    for (int k = 0; k < g->n_inputs; k++) {
        const char *name = g->values[g->inputs[k]].name;
        int r = role_of_use(use, g->n_inputs, k);
        if (r < 0) r = role_of_name(name);
        if (r < 0) {
            snprintf(what, sizeof what,
                     "cannot tell what '%s' takes: it indexes no embedding table, feeds no "
                     "arithmetic, and its name says neither ids, mask nor type",
                     name);
            return undecided(g, e, what);
        }
        if (roles[r] < 0)
            roles[r] = k;
        else if (settle_tie(g, roles, r, k, what, sizeof what) != 0)
            return undecided(g, e, what);
    }
    if (roles[GRAFT_TEXT_INPUT_IDS] < 0)
        return undecided(g, e, "none takes the token ids (none indexes an embedding table)");
    for (int r = 0; r < GRAFT_TEXT_INPUT_COUNT; r++)
        if (roles[r] >= 0) roles[r] = g->inputs[roles[r]];
    return GRAFT_OK;
}

graft_status graph_text_inputs(const ir_graph *g, int roles[GRAFT_TEXT_INPUT_COUNT], graft_err *e) {
    if (g->n_inputs < 1 || g->n_inputs > GRAFT_TEXT_INPUT_COUNT)
        return undecided(g, e,
                         "a text model takes 1 to 3 inputs (token ids, attention mask, "
                         "token type ids)");
    input_use *use = calloc((size_t)g->n_inputs, sizeof *use);
    if (!use) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    graft_status st = GRAFT_OK;
    for (int k = 0; k < g->n_inputs && st == GRAFT_OK; k++)
        st = trace_input(g, g->inputs[k], &use[k], e);
    if (st == GRAFT_OK) st = assign(g, use, roles, e);
    free(use);
    return st;
}

graft_status graft_model_text_inputs(const graft_model *m,
                                     const char *names[GRAFT_TEXT_INPUT_COUNT]) {
    if (!m || !names) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &m->ctx->err;
    err_clear(e);
    int roles[GRAFT_TEXT_INPUT_COUNT];
    TRY(graph_text_inputs(&m->g, roles, e));
    for (int r = 0; r < GRAFT_TEXT_INPUT_COUNT; r++)
        names[r] = roles[r] >= 0 ? m->g.values[roles[r]].name : NULL;
    return GRAFT_OK;
}
