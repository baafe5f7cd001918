/* text_folder.c: listing a DIR/<class>/<name>.txt text folder with the folder walker. */
#include "text_folder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static graft_status no_memory(graft_err *e, const char *path) {
    return err_set(e, GRAFT_E_OUT_OF_MEMORY, "%s: out of memory while loading text data", path);
}

/* Whether class folder c's name is among known (always, without known). */
static int is_known(const char *name, char *const *known, int n_known) {
    if (!known || n_known <= 0) return 1;
    for (int k = 0; k < n_known; k++)
        if (strcmp(known[k], name) == 0) return 1;
    return 0;
}

graft_status text_folder_list(text_folder *f, const char *dir, char *const *known, int n_known,
                              graft_err *e) {
    memset(f, 0, sizeof *f);
    f->w.kind = FILE_WALK_TEXT;
    f->w.flat = true;
    graft_status st = file_walk_classes(&f->w, dir, &f->classes, &f->n_classes, e);
    if (st == GRAFT_OK && f->n_classes == 0)
        st = err_set(e, GRAFT_E_INVALID_ARGUMENT, "%s: no class folders", dir);
    if (st == GRAFT_OK) {
        f->file_start = calloc((size_t)f->n_classes + 1, sizeof *f->file_start);
        f->note_start = calloc((size_t)f->n_classes + 1, sizeof *f->note_start);
        if (!f->file_start || !f->note_start) st = no_memory(e, dir);
    }
    for (int64_t c = 0; st == GRAFT_OK && c < f->n_classes; c++) {
        size_t len = strlen(dir) + strlen(f->classes[c]) + 2;
        char *sub = malloc(len);
        if (!sub) {
            st = no_memory(e, dir);
            break;
        }
        snprintf(sub, len, "%s/%s", dir, f->classes[c]);
        f->file_start[c] = f->w.n_paths, f->note_start[c] = f->w.n_notes;
        st = file_walk_dir(&f->w, sub, e);
        if (st == GRAFT_OK && f->w.n_paths == f->file_start[c])
            st =
                err_set(e, GRAFT_E_INVALID_ARGUMENT, "%s: empty class folder (no .txt files)", sub);
        if (st == GRAFT_OK && !is_known(f->classes[c], known, n_known))
            st = err_set(e, GRAFT_E_INVALID_ARGUMENT,
                         "%s: class '%s' is not one of the %d classes of the data it must match",
                         sub, f->classes[c], n_known);
        free(sub);
    }
    if (st == GRAFT_OK)
        f->file_start[f->n_classes] = f->w.n_paths, f->note_start[f->n_classes] = f->w.n_notes;
    if (st != GRAFT_OK) text_folder_free(f);
    return st;
}

void text_folder_free(text_folder *f) {
    if (!f) return;
    file_names_free(f->classes, f->n_classes);
    free(f->file_start);
    free(f->note_start);
    file_walk_free(&f->w);
    memset(f, 0, sizeof *f);
}
