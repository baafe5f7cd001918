/* file_list.h: the image files of a folder tree by torchvision's ImageFolder rules (recursive,
 * by extension, sorted), without hidden entries, and entering no folder twice (link loops). */
#ifndef GRAFT_DATA_FILE_LIST_H
#define GRAFT_DATA_FILE_LIST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../core/error.h"

/* Something the listing left out and says why: a file or folder whose images are not listed
 * (skipped: an unsupported format, an unreadable entry), or a folder already listed once
 * (not skipped: it is not entered again, so a link loop ends and nothing comes twice). */
typedef struct file_note {
    char *path, *reason;
    bool skipped;
} file_note;

typedef struct folder_id {
    dev_t dev;
    ino_t ino;
    bool used; /* a filled slot of the hash set */
} folder_id;

/* One listing: the files found so far, the notes, and every folder entered (device + inode). */
typedef struct file_walk {
    char **paths;
    int64_t n_paths, cap_paths;
    file_note *notes;
    int64_t n_notes, cap_notes;
    folder_id *seen; /* hash set, cap_seen slots (a power of two) */
    int64_t n_seen, cap_seen;
} file_walk;

/* Whether a name is one of torchvision's image extensions (any case): .jpg .jpeg .png .ppm .bmp
 * .pgm .tif .tiff .webp. */
bool file_is_image_name(const char *name);

/* Record dir as entered; *already says whether it was before. An unreadable dir is an error. */
graft_status file_walk_mark(file_walk *w, const char *dir, bool *already, graft_err *e);
/* Append every image file under dir (entered even if marked) and below, following links, in
 * torchvision's order (folders by path, then names); JPEG and PNG files (by name, or by
 * content for the other image names) are listed, the rest noted. Errors: out of memory, or dir
 * itself unreadable. */
graft_status file_walk_images(file_walk *w, const char *dir, graft_err *e);
void file_walk_free(file_walk *w);

/* Sorted names of the subfolders of dir (links followed) whose names do not start with '.'. */
graft_status file_list_subdirs(const char *dir, char ***names, int64_t *n, graft_err *e);
void file_names_free(char **names, int64_t n);

#endif
