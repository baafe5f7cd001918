/* conformance_report.c: the conformance runner's bookkeeping: known exceptions, per-op tallies. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance_report.h"

/* ---- the known-exceptions file -------------------------------------------------------------- */

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

static bool known_add(known_list *kl, const char *test, const char *reason) {
    if (kl->n == kl->cap) {
        int cap = kl->cap ? kl->cap * 2 : 32;
        known_entry *grown = realloc(kl->items, (size_t)cap * sizeof *grown);
        if (!grown) return false;
        kl->items = grown;
        kl->cap = cap;
    }
    known_entry *k = &kl->items[kl->n];
    k->test = strdup(test);
    k->reason = strdup(reason[0] ? reason : "listed as a known exception");
    k->seen = false;
    if (!k->test || !k->reason) {
        free(k->test);
        free(k->reason);
        return false;
    }
    kl->n++;
    return true;
}

/* Lines are "test_name  reason..."; blank lines and lines starting with # are skipped. */
bool known_load(const char *path, known_list *kl) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "conformance: cannot open %s: %s\n", path, strerror(errno));
        return false;
    }
    char line[2048];
    bool ok = true;
    while (ok && fgets(line, sizeof line, f)) {
        char *s = trim(line);
        if (!s[0] || s[0] == '#') continue;
        char *rest = s + strcspn(s, " \t");
        if (*rest) *rest++ = '\0';
        ok = known_add(kl, s, trim(rest));
    }
    fclose(f);
    if (!ok) fprintf(stderr, "conformance: out of memory reading %s\n", path);
    return ok;
}

known_entry *known_find(known_list *kl, const char *test) {
    for (int i = 0; i < kl->n; i++)
        if (strcmp(kl->items[i].test, test) == 0) return &kl->items[i];
    return NULL;
}

void known_free(known_list *kl) {
    for (int i = 0; i < kl->n; i++) {
        free(kl->items[i].test);
        free(kl->items[i].reason);
    }
    free(kl->items);
}

/* ---- tallies and the per-op table ----------------------------------------------------------- */

static op_stats *stats_for(run_totals *t, const char *op) {
    for (int i = 0; i < t->n_ops; i++)
        if (strcmp(t->ops[i].op, op) == 0) return &t->ops[i];
    if (t->n_ops == t->cap_ops) {
        int cap = t->cap_ops ? t->cap_ops * 2 : 32;
        op_stats *grown = realloc(t->ops, (size_t)cap * sizeof *grown);
        if (!grown) return NULL;
        t->ops = grown;
        t->cap_ops = cap;
    }
    op_stats *s = &t->ops[t->n_ops];
    memset(s, 0, sizeof *s);
    s->op = strdup(op);
    if (!s->op) return NULL;
    t->n_ops++;
    return s;
}

void tally(run_totals *t, const char *op, outcome result) {
    op_stats *s = stats_for(t, op);
    int *total[] = {&t->passed, &t->failed, &t->known};
    (*total[result])++;
    if (!s) return;
    int *per_op[] = {&s->passed, &s->failed, &s->known};
    (*per_op[result])++;
}

static int compare_op_stats(const void *a, const void *b) {
    return strcmp(((const op_stats *)a)->op, ((const op_stats *)b)->op);
}

void print_table(run_totals *t) {
    if (t->n_ops == 0) return;
    qsort(t->ops, (size_t)t->n_ops, sizeof *t->ops, compare_op_stats);
    printf("\n%-28s %7s %7s %7s\n", "op", "passed", "failed", "known");
    for (int i = 0; i < t->n_ops; i++)
        printf("%-28s %7d %7d %7d\n", t->ops[i].op, t->ops[i].passed, t->ops[i].failed,
               t->ops[i].known);
}

void totals_free(run_totals *t) {
    for (int i = 0; i < t->n_ops; i++) free(t->ops[i].op);
    free(t->ops);
}
