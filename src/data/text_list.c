/* text_list.c: the public graft_text_list: unlabelled texts from a CSV/TSV column, to classify. */
#include <stdlib.h>

#include "../core/context.h"
#include "text_table.h"

struct graft_text_list {
    text_table *table;
};

graft_status graft_text_list_open_csv(graft_ctx *ctx, const char *path, const char *text_column,
                                      graft_text_list **out) {
    if (!ctx) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &ctx->err;
    err_clear(e);
    if (!path || !text_column || !out)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "open_csv needs a path and a column name");
    graft_text_list *l = calloc(1, sizeof *l);
    if (!l) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    text_table_options o = TEXT_TABLE_OPTIONS_INIT;
    o.text_column = text_column;
    o.label_column = NULL;
    o.label_mode = TEXT_LABEL_NONE;
    graft_status st = text_table_load_csv(&l->table, path, &o, e);
    if (st != GRAFT_OK) {
        free(l);
        return st;
    }
    *out = l;
    return GRAFT_OK;
}

void graft_text_list_free(graft_text_list *list) {
    if (!list) return;
    text_table_free(list->table);
    free(list);
}

int64_t graft_text_list_count(const graft_text_list *list) {
    return list ? text_table_count(list->table) : 0;
}

const char *graft_text_list_text(const graft_text_list *list, int64_t index) {
    return list ? text_table_text(list->table, index) : NULL;
}

int64_t graft_text_list_line(const graft_text_list *list, int64_t index) {
    return list ? text_table_line(list->table, index) : 0;
}

int64_t graft_text_list_skipped_count(const graft_text_list *list) {
    return list ? text_table_skipped_count(list->table) : 0;
}

graft_status graft_text_list_skipped(const graft_text_list *list, int64_t index, int64_t *line,
                                     const char **reason) {
    const text_skip *s = list ? text_table_skipped(list->table, index) : NULL;
    if (!s || !line || !reason) return GRAFT_E_INVALID_ARGUMENT;
    *line = s->line, *reason = s->reason;
    return GRAFT_OK;
}
