/* file_list.h: the one walker of data folders: image files by torchvision's ImageFolder rules,
 * or .txt files, with no folder entered twice and no file listed twice (device + inode), every
 * entry left out noted with why, and bounded depth and entry count. */
#ifndef GRAFT_DATA_FILE_LIST_H
#define GRAFT_DATA_FILE_LIST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../core/error.h"

#define FILE_WALK_MAX_DEPTH 64           /* folders below the top folder */
#define FILE_WALK_MAX_ENTRIES 10000000ll /* names read in one walk (hidden ones not counted) */

/* Something the listing left out and why: skipped (it may hold data graft did not read: an
 * unsupported format, a dangling link, a FIFO, an unreadable entry), or a repeat (skipped =
 * false: a link loop, a folder or file already listed under another path; nothing is lost). */
typedef struct file_note {
    char *path, *reason;
    bool skipped;
} file_note;

/* A folder or file met: its device and inode and the path it was first met at. */
typedef struct walk_id {
    dev_t dev;
    ino_t ino;
    char *first; /* folders: owned; files: the listed path or note path (owned by paths/notes) */
    bool used;   /* a filled slot of the hash set */
} walk_id;

typedef struct walk_set {
    walk_id *v; /* (cap) open addressing, at most half full; cap a power of two */
    int64_t n, cap;
} walk_set;

typedef enum file_walk_kind {
    FILE_WALK_IMAGES = 0, /* image names, listed by folder path then name (sorted(os.walk)) */
    FILE_WALK_TEXT = 1,   /* names ending in .txt (any case), in depth-first name order */
} file_walk_kind;

/* A listed file's size and modification time (seconds), from the walk's own look at it (a
 * link's: its target's). */
typedef struct file_stamp {
    int64_t size, mtime;
} file_stamp;

/* One listing. Set kind, flat and the limits (0: the defaults above) before the first call;
 * then paths holds the files found so far, stamps their sizes and times (the same order), and
 * notes what was left out. */
typedef struct file_walk {
    file_walk_kind kind;
    bool flat; /* only a folder's own files: subfolders and files of other names are noted */
    int max_depth;
    int64_t max_entries;
    char **paths;
    int64_t n_paths, cap_paths;
    file_stamp *stamps; /* (n_paths) */
    int64_t cap_stamps;
    file_note *notes;
    int64_t n_notes, cap_notes;
    walk_set dirs, files;
    int64_t n_entries;
} file_walk;

/* Whether a name is one of torchvision's image extensions (any case): .jpg .jpeg .png .ppm .bmp
 * .pgm .tif .tiff .webp. */
bool file_is_image_name(const char *name);

/* Append the files of dir and (unless flat) of the folders below it, following links, hidden
 * names ('.' first) left out. dir is entered even if met before (a class folder listed by
 * file_walk_classes); below it a folder met before is a note ("link loop" when it is an
 * ancestor), and so is a file met before ("same file as"). Images: JPEG and PNG files (by name,
 * or by content for the other image names) are listed, the other image formats noted, files of
 * other names ignored. Text: .txt files are listed, other names ignored (noted when flat).
 * Dangling links, unreadable entries and what is not a regular file or folder (FIFOs, sockets,
 * devices: never opened) are noted. Errors: dir unreadable or not a folder, out of memory,
 * deeper than max_depth, more than max_entries names. */
graft_status file_walk_dir(file_walk *w, const char *dir, graft_err *e);
/* The class folders of root: its subfolders (links followed, hidden ones left out), sorted by
 * name; each is marked as met, so file_walk_dir under one does not enter another. A folder met
 * before (a link to root or to another class) and an entry that cannot be read are notes;
 * files are ignored. Errors: root unreadable, out of memory, more than max_entries names. */
graft_status file_walk_classes(file_walk *w, const char *root, char ***names, int64_t *n,
                               graft_err *e);
void file_walk_free(file_walk *w);
void file_names_free(char **names, int64_t n);

#endif
