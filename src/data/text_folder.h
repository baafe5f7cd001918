/* text_folder.h: the files of a DIR/<class>/<name>.txt text folder, listed by the folder walker
 * (file_list.h): class folders, their .txt files, and every entry left out with why. */
#ifndef GRAFT_DATA_TEXT_FOLDER_H
#define GRAFT_DATA_TEXT_FOLDER_H

#include <stdint.h>

#include "file_list.h"

typedef struct text_folder {
    char **classes; /* (n_classes) sorted folder names */
    int64_t n_classes;
    int64_t *file_start; /* (n_classes + 1) class c's files: w.paths[file_start[c]..c+1) */
    int64_t *note_start; /* (n_classes + 1) notes before class c's files: w.notes[..note_start[c]),
                            class c's own: [note_start[c], note_start[c + 1]) */
    file_walk w;
} text_folder;

/* List dir's class folders (hidden ones and folders met before, a link to dir or to another
 * class, passed over and noted) and the entries of each, one level deep: .txt files (any case)
 * listed in name order; other files, subfolders, dangling links, FIFOs and the like noted. A
 * class folder without a .txt file, no class folder at all, and (with known, n_known > 0) a
 * class not among known are errors. */
graft_status text_folder_list(text_folder *f, const char *dir, char *const *known, int n_known,
                              graft_err *e);
void text_folder_free(text_folder *f);

#endif
