/* conformance_report.h: known exceptions and per-op tallies of the conformance runner. */
#ifndef GRAFT_TESTS_CONFORMANCE_REPORT_H
#define GRAFT_TESTS_CONFORMANCE_REPORT_H

#include <stdbool.h>

typedef struct known_entry {
    char *test;
    char *reason;
    bool seen;
} known_entry;

typedef struct known_list {
    known_entry *items;
    int n, cap;
} known_list;

typedef struct op_stats {
    char *op;
    int passed, failed, known;
} op_stats;

typedef struct run_totals {
    op_stats *ops;
    int n_ops, cap_ops;
    int passed, failed, known, not_claimed;
} run_totals;

typedef enum outcome { OUTCOME_PASS, OUTCOME_FAIL, OUTCOME_KNOWN } outcome;

/* Lines are "test_name  reason..."; blank lines and lines starting with # are skipped. false
 * (with a message on stderr) when the file cannot be read or memory runs out. */
bool known_load(const char *path, known_list *kl);
/* The entry for `test`, or NULL. */
known_entry *known_find(known_list *kl, const char *test);
void known_free(known_list *kl);

/* Count one test's outcome in the totals and in its op's row. */
void tally(run_totals *t, const char *op, outcome result);
/* Print the per-op table, sorted by op name (nothing when no test ran). */
void print_table(run_totals *t);
void totals_free(run_totals *t);

#endif
