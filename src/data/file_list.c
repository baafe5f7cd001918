/* file_list.c: walking data folders (file_list.h), shared by image data sets
 * (graft_dataset_open_images), text folders (text_folder.c) and `graft predict`
 * (graft_image_files, graft_text_files). */
#include "file_list.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/context.h"

/* torchvision's IMG_EXTENSIONS, and what graft calls the formats it does not decode. */
static const char *const image_exts[][2] = {
    {".jpg", NULL},  {".jpeg", NULL},  {".png", NULL},    {".ppm", "PPM"},   {".bmp", "BMP"},
    {".pgm", "PGM"}, {".tif", "TIFF"}, {".tiff", "TIFF"}, {".webp", "WebP"},
};

/* The extension table row of name, or -1. */
static int image_ext(const char *name) {
    size_t len = strlen(name);
    for (size_t i = 0; i < sizeof image_exts / sizeof *image_exts; i++) {
        size_t n = strlen(image_exts[i][0]);
        if (len > n && strcasecmp(name + len - n, image_exts[i][0]) == 0) return (int)i;
    }
    return -1;
}

bool file_is_image_name(const char *name) {
    return image_ext(name) >= 0;
}

static bool is_text_name(const char *name) {
    size_t len = strlen(name);
    return len > 4 && strcasecmp(name + len - 4, ".txt") == 0;
}

/* Whether the file starts as a JPEG or PNG does (a .bmp that is really a PNG is read). Opened
 * without blocking and read only if it is still a regular file. */
static bool decodable_content(const char *path) {
    unsigned char head[8] = {0};
    ssize_t got = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat sb;
    if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) got = read(fd, head, sizeof head);
    if (fd >= 0) close(fd);
    static const unsigned char png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    return (got >= 3 && head[0] == 0xff && head[1] == 0xd8 && head[2] == 0xff) ||
           (got == 8 && memcmp(head, png, 8) == 0);
}

static graft_status grow(void **v, int64_t *cap, int64_t need, size_t size, graft_err *e) {
    if (need <= *cap) return GRAFT_OK;
    int64_t c = *cap ? *cap * 2 : 64;
    while (c < need) c *= 2;
    void *n = realloc(*v, size * (size_t)c);
    if (!n) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory listing files");
    *v = n, *cap = c;
    return GRAFT_OK;
}

static graft_status add_path(file_walk *w, char *path, const struct stat *sb, graft_err *e) {
    graft_status st = grow((void **)&w->paths, &w->cap_paths, w->n_paths + 1, sizeof *w->paths, e);
    if (st == GRAFT_OK)
        st = grow((void **)&w->stamps, &w->cap_stamps, w->n_paths + 1, sizeof *w->stamps, e);
    if (st != GRAFT_OK) return free(path), st;
    w->stamps[w->n_paths] = (file_stamp){(int64_t)sb->st_size, (int64_t)sb->st_mtime};
    w->paths[w->n_paths++] = path;
    return GRAFT_OK;
}

static graft_status add_note(file_walk *w, const char *path, bool skipped, const char *reason,
                             graft_err *e) {
    TRY(grow((void **)&w->notes, &w->cap_notes, w->n_notes + 1, sizeof *w->notes, e));
    file_note *n = &w->notes[w->n_notes];
    n->path = strdup(path), n->reason = strdup(reason), n->skipped = skipped;
    if (!n->path || !n->reason) {
        free(n->path), free(n->reason);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory listing files");
    }
    w->n_notes++;
    return GRAFT_OK;
}

/* ---- sets of (device, inode) ---------------------------------------------------------------- */

/* The slot of (dev, ino) in s, or of the empty place for it (s->cap > 0). */
static int64_t set_slot(const walk_set *s, dev_t dev, ino_t ino) {
    uint64_t h = ((uint64_t)ino * 0x9e3779b97f4a7c15ull) ^ (uint64_t)dev;
    int64_t mask = s->cap - 1, i = (int64_t)(h & (uint64_t)mask);
    while (s->v[i].used && (s->v[i].dev != dev || s->v[i].ino != ino)) i = (i + 1) & mask;
    return i;
}

/* The path sb's file or folder was first met at, or NULL when it was not met before. */
static const char *set_find(const walk_set *s, const struct stat *sb) {
    if (!s->cap) return NULL;
    const walk_id *id = &s->v[set_slot(s, sb->st_dev, sb->st_ino)];
    return id->used ? id->first : NULL;
}

/* Add sb's identity (not in s yet) with the path first (taken: owned or not, as s is used). */
static graft_status set_add(walk_set *s, const struct stat *sb, char *first, graft_err *e) {
    if (2 * (s->n + 1) > s->cap) {
        walk_set bigger = {.cap = s->cap ? s->cap * 2 : 64};
        bigger.v = calloc((size_t)bigger.cap, sizeof *bigger.v);
        if (!bigger.v) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory listing files");
        for (int64_t i = 0; i < s->cap; i++)
            if (s->v[i].used) bigger.v[set_slot(&bigger, s->v[i].dev, s->v[i].ino)] = s->v[i];
        free(s->v);
        s->v = bigger.v, s->cap = bigger.cap;
    }
    s->v[set_slot(s, sb->st_dev, sb->st_ino)] = (walk_id){sb->st_dev, sb->st_ino, first, true};
    s->n++;
    return GRAFT_OK;
}

/* Record the folder dir (sb) as met, if it was not; *first: where it was met first (NULL: now). */
static graft_status mark_dir(file_walk *w, const char *dir, const struct stat *sb,
                             const char **first, graft_err *e) {
    *first = set_find(&w->dirs, sb);
    if (*first) return GRAFT_OK;
    char *copy = strdup(dir);
    if (!copy) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory listing files");
    graft_status st = set_add(&w->dirs, sb, copy, e);
    if (st != GRAFT_OK) free(copy);
    return st;
}

/* ---- reading folders ------------------------------------------------------------------------ */

static char *join(const char *dir, const char *name) {
    size_t len = strlen(dir) + strlen(name) + 2;
    char *p = malloc(len);
    if (p) snprintf(p, len, "%s/%s", dir, name);
    return p;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Depth-first order of sorted names: paths compared with '/' below every other byte, so a
 * folder's files come where its name falls among its siblings' names. */
static int cmp_depth_first(const void *a, const void *b) {
    const unsigned char *x = *(unsigned char *const *)a, *y = *(unsigned char *const *)b;
    while (*x && *x == *y) x++, y++;
    int cx = *x == '/' ? 1 : *x ? *x + 1 : 0, cy = *y == '/' ? 1 : *y ? *y + 1 : 0;
    return cx - cy;
}

static int cmp_note(const void *a, const void *b) {
    return cmp_depth_first(&((const file_note *)a)->path, &((const file_note *)b)->path);
}

/* torchvision's order, sorted(os.walk(...)) then sorted names: by folder path, then name. */
static int cmp_walk_order(const void *a, const void *b) {
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    size_t dx = (size_t)(strrchr(x, '/') - x), dy = (size_t)(strrchr(y, '/') - y);
    int c = memcmp(x, y, dx < dy ? dx : dy);
    if (c || dx != dy) return c ? c : (dx < dy ? -1 : 1);
    return strcmp(x + dx + 1, y + dy + 1);
}

void file_names_free(char **names, int64_t n) {
    for (int64_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

static int64_t max_entries(const file_walk *w) {
    return w->max_entries > 0 ? w->max_entries : FILE_WALK_MAX_ENTRIES;
}

/* The names in dir, hidden ones (a leading '.') left out, sorted, counted in w->n_entries.
 * Errors: dir unreadable (io_error: the folder is a note rather than an error below the top),
 * out of memory, too many names. */
static graft_status read_names(file_walk *w, const char *dir, char ***out, int64_t *n,
                               int *io_error, graft_err *e) {
    *io_error = 0, *out = NULL, *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        *io_error = errno;
        return err_set(e, GRAFT_E_IO, "cannot open folder '%s': %s", dir, strerror(errno));
    }
    char **v = NULL;
    int64_t cap = 0, limit = max_entries(w);
    graft_status st = GRAFT_OK;
    errno = 0;
    for (struct dirent *ent; st == GRAFT_OK && (ent = readdir(d)) != NULL; errno = 0) {
        if (ent->d_name[0] == '.') continue;
        if (++w->n_entries > limit)
            st = err_set(e, GRAFT_E_INVALID_ARGUMENT,
                         "more than %lld entries in the data folder (a data folder's limit), "
                         "reached in '%s'",
                         (long long)limit, dir);
        else if ((st = grow((void **)&v, &cap, *n + 1, sizeof *v, e)) == GRAFT_OK &&
                 !(v[*n] = strdup(ent->d_name)))
            st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory listing '%s'", dir);
        else if (st == GRAFT_OK)
            ++*n;
    }
    if (st == GRAFT_OK && errno) {
        *io_error = errno;
        st = err_set(e, GRAFT_E_IO, "cannot read folder '%s': %s", dir, strerror(errno));
    }
    closedir(d);
    if (st != GRAFT_OK) return file_names_free(v, *n), *n = 0, st;
    if (*n) qsort(v, (size_t)*n, sizeof *v, cmp_str);
    *out = v;
    return GRAFT_OK;
}

/* What a file type is called in a note. */
static const char *type_name(mode_t m) {
    return S_ISFIFO(m)   ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
                         : "of an unknown type";
}

/* Look at path without opening it: *sb is what it is (a link followed once, to its end). 0 when
 * it cannot be looked at, and then why is the note's reason. */
static int look(const char *path, struct stat *sb, char *why, size_t size) {
    if (lstat(path, sb) != 0) return snprintf(why, size, "cannot read: %s", strerror(errno)), 0;
    if (!S_ISLNK(sb->st_mode)) return 1;
    if (stat(path, sb) == 0) return 1;
    int err = errno;
    char to[1024];
    ssize_t n = readlink(path, to, sizeof to - 1);
    to[n > 0 ? n : 0] = 0;
    if (err == ENOENT)
        snprintf(why, size, "dangling link (to '%s', which does not exist)", to);
    else if (err == ELOOP)
        snprintf(why, size, "link loop (a chain of links that leads back to itself)");
    else
        snprintf(why, size, "cannot follow the link to '%s': %s", to, strerror(err));
    return 0;
}

/* The note for a folder or file met before at first: a link loop when first is an ancestor of
 * path (its folders are all met at their own paths), else the same folder or file again. */
static graft_status note_repeat(file_walk *w, const char *path, const char *first, bool dir,
                                graft_err *e) {
    char why[4200];
    size_t n = strlen(first);
    if (dir && strncmp(path, first, n) == 0 && path[n] == '/')
        snprintf(why, sizeof why, "link loop: leads back to '%s' (not entered again)", first);
    else
        snprintf(why, sizeof why, "same %s as '%s' (listed once)", dir ? "folder" : "file", first);
    return add_note(w, path, false, why, e);
}

static graft_status walk_dir(file_walk *w, const char *dir, int depth, graft_err *e);

/* A regular file: listed (and remembered) when its name is one the walk lists. */
static graft_status walk_file(file_walk *w, char *path, const char *name, const struct stat *sb,
                              graft_err *e) {
    int ext = image_ext(name);
    bool wanted = w->kind == FILE_WALK_TEXT ? is_text_name(name) : ext >= 0;
    if (!wanted) {
        graft_status st = w->flat ? add_note(w, path, true, "not a .txt file", e) : GRAFT_OK;
        return free(path), st;
    }
    const char *first = set_find(&w->files, sb);
    if (first) {
        graft_status st = note_repeat(w, path, first, false, e);
        return free(path), st;
    }
    if (w->kind == FILE_WALK_IMAGES && image_exts[ext][1] && !decodable_content(path)) {
        char why[320];
        snprintf(why, sizeof why, "%s images are not supported (graft decodes JPEG and PNG)",
                 image_exts[ext][1]);
        graft_status st = add_note(w, path, true, why, e);
        free(path);
        return st == GRAFT_OK ? set_add(&w->files, sb, w->notes[w->n_notes - 1].path, e) : st;
    }
    TRY(add_path(w, path, sb, e)); /* takes path */
    return set_add(&w->files, sb, path, e);
}

/* One entry of a folder being listed: a subfolder (entered unless met before), a file, or
 * something noted. known: its lstat when that is not a link (NULL: looked at here). Takes
 * path. */
static graft_status walk_entry(file_walk *w, char *path, const char *name, int depth,
                               const struct stat *known, graft_err *e) {
    struct stat sb;
    char why[1400];
    graft_status st = GRAFT_OK;
    if (known) sb = *known;
    if (!known && !look(path, &sb, why, sizeof why)) {
        st = add_note(w, path, true, why, e);
    } else if (S_ISREG(sb.st_mode)) {
        return walk_file(w, path, name, &sb, e);
    } else if (S_ISDIR(sb.st_mode) && w->flat) {
        st = add_note(w, path, true,
                      "a folder (the files of a class folder are read, not its "
                      "subfolders)",
                      e);
    } else if (S_ISDIR(sb.st_mode)) {
        int limit = w->max_depth > 0 ? w->max_depth : FILE_WALK_MAX_DEPTH;
        const char *first;
        if (depth + 1 > limit)
            st = err_set(e, GRAFT_E_INVALID_ARGUMENT,
                         "'%s': folders nested more than %d deep (a data folder's limit)", path,
                         limit);
        else if ((st = mark_dir(w, path, &sb, &first, e)) == GRAFT_OK)
            st = first ? note_repeat(w, path, first, true, e) : walk_dir(w, path, depth + 1, e);
    } else {
        snprintf(why, sizeof why, "not a regular file (%s; not opened)", type_name(sb.st_mode));
        st = add_note(w, path, true, why, e);
    }
    free(path);
    return st;
}

/* Below the top folder an unreadable folder is noted; the top one (depth 0) is an error. */
static graft_status walk_dir(file_walk *w, const char *dir, int depth, graft_err *e) {
    int64_t n = 0;
    char **names;
    int io_error;
    graft_status st = read_names(w, dir, &names, &n, &io_error, e);
    if (st != GRAFT_OK && io_error && depth > 0) {
        char why[320];
        snprintf(why, sizeof why, "cannot open folder: %s", strerror(io_error));
        err_clear(e);
        return add_note(w, dir, true, why, e);
    }
    /* links in a second pass: where a tree holds a file or folder and a link to it, the real
     * path is listed and the link is the repeat (one lstat an entry: the first pass's) */
    bool *is_link = st == GRAFT_OK ? calloc((size_t)n + 1, sizeof *is_link) : NULL;
    if (st == GRAFT_OK && !is_link)
        st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory listing '%s'", dir);
    /* each entry looked at by its name in the folder: the kernel resolves one name, not the
     * whole path again (a third of a listing's time went in path lookups) */
    int dfd = st == GRAFT_OK ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    for (int pass = 0; pass < 2; pass++)
        for (int64_t i = 0; i < n && st == GRAFT_OK; i++) {
            if (pass == 1 && !is_link[i]) continue;
            char *path = join(dir, names[i]);
            struct stat sb;
            if (!path) {
                st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory listing '%s'", dir);
                break;
            }
            bool seen = pass == 0 && (dfd >= 0 ? fstatat(dfd, names[i], &sb, AT_SYMLINK_NOFOLLOW)
                                               : lstat(path, &sb)) == 0;
            if (pass == 0 && seen && S_ISLNK(sb.st_mode)) {
                is_link[i] = true, free(path);
                continue;
            }
            /* takes path; an entry lstat cannot read is looked at again (the note's reason) */
            st = walk_entry(w, path, names[i], depth, seen ? &sb : NULL, e);
        }
    if (dfd >= 0) close(dfd);
    free(is_link);
    file_names_free(names, n);
    return st;
}

/* A listed path with its stamp, sorted together (the comparators read the path, the first
 * member). */
typedef struct stamped_path {
    char *path;
    file_stamp stamp;
} stamped_path;

/* paths[start..) in the walk's order (torchvision's for images), their stamps with them. */
static graft_status sort_paths(file_walk *w, int64_t start, graft_err *e) {
    int64_t n = w->n_paths - start;
    if (n < 2) return GRAFT_OK;
    stamped_path *v = malloc(sizeof *v * (size_t)n);
    if (!v)
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory sorting %lld files", (long long)n);
    for (int64_t i = 0; i < n; i++)
        v[i] = (stamped_path){w->paths[start + i], w->stamps[start + i]};
    qsort(v, (size_t)n, sizeof *v, w->kind == FILE_WALK_IMAGES ? cmp_walk_order : cmp_depth_first);
    for (int64_t i = 0; i < n; i++)
        w->paths[start + i] = v[i].path, w->stamps[start + i] = v[i].stamp;
    free(v);
    return GRAFT_OK;
}

/* The top folder: it must be a folder; marked as met (it may be already). */
static graft_status top_dir(file_walk *w, const char *dir, graft_err *e) {
    struct stat sb;
    const char *first;
    if (stat(dir, &sb) != 0)
        return err_set(e, GRAFT_E_IO, "cannot open folder '%s': %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return err_set(e, GRAFT_E_IO, "'%s' is not a folder", dir);
    return mark_dir(w, dir, &sb, &first, e);
}

graft_status file_walk_dir(file_walk *w, const char *dir, graft_err *e) {
    TRY(top_dir(w, dir, e));
    int64_t start = w->n_paths, first_note = w->n_notes;
    TRY(walk_dir(w, dir, 0, e));
    if (w->n_notes > first_note)
        qsort(w->notes + first_note, (size_t)(w->n_notes - first_note), sizeof *w->notes, cmp_note);
    return sort_paths(w, start, e);
}

/* Entry name of root as a class folder (kept: *keep) or a note; links only in the second pass
 * (links_pass), so a real folder is the class and a link to it the repeat. */
static graft_status class_entry(file_walk *w, const char *root, const char *name, bool links_pass,
                                bool *keep, graft_err *e) {
    *keep = false;
    char *path = join(root, name);
    if (!path) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory listing '%s'", root);
    struct stat sb;
    char why[1400];
    const char *first;
    graft_status st = GRAFT_OK;
    bool is_link = lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode);
    if (is_link != links_pass) {
        /* the other pass's entry (an entry lstat cannot read: the first pass's) */
    } else if (!look(path, &sb, why, sizeof why)) {
        st = add_note(w, path, true, why, e);
    } else if (S_ISDIR(sb.st_mode) && (st = mark_dir(w, path, &sb, &first, e)) == GRAFT_OK) {
        if (first)
            st = note_repeat(w, path, first, true, e);
        else
            *keep = true;
    }
    free(path);
    return st;
}

graft_status file_walk_classes(file_walk *w, const char *root, char ***names, int64_t *n,
                               graft_err *e) {
    *names = NULL, *n = 0;
    TRY(top_dir(w, root, e));
    int64_t count = 0, kept = 0;
    char **v;
    int io_error;
    TRY(read_names(w, root, &v, &count, &io_error, e));
    bool *keep = calloc((size_t)count + 1, sizeof *keep);
    graft_status st = keep ? GRAFT_OK : err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    for (int pass = 0; pass < 2; pass++)
        for (int64_t i = 0; i < count && st == GRAFT_OK; i++) {
            bool k = false;
            st = class_entry(w, root, v[i], pass == 1, &k, e);
            keep[i] |= k;
        }
    for (int64_t i = 0; i < count; i++) {
        if (st == GRAFT_OK && keep[i])
            v[kept++] = v[i];
        else
            free(v[i]);
    }
    free(keep);
    if (st != GRAFT_OK) return free(v), st;
    *names = v, *n = kept;
    return GRAFT_OK;
}

void file_walk_free(file_walk *w) {
    if (!w) return;
    file_names_free(w->paths, w->n_paths);
    free(w->stamps);
    for (int64_t i = 0; i < w->n_notes; i++) free(w->notes[i].path), free(w->notes[i].reason);
    free(w->notes);
    for (int64_t i = 0; i < w->dirs.cap; i++)
        if (w->dirs.v[i].used) free(w->dirs.v[i].first);
    free(w->dirs.v);
    free(w->files.v);
    memset(w, 0, sizeof *w);
}

/* ---- the public listing ------------------------------------------------------------------ */

struct graft_file_list {
    file_walk w;
};

static graft_status list_files(graft_ctx *ctx, const char *dir, file_walk_kind kind,
                               graft_file_list **out) {
    if (!ctx) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &ctx->err;
    err_clear(e);
    if (!dir || !out) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "no folder given");
    *out = NULL;
    graft_file_list *l = calloc(1, sizeof *l);
    if (!l) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    l->w.kind = kind;
    graft_status st = file_walk_dir(&l->w, dir, e);
    if (st != GRAFT_OK) return graft_file_list_free(l), st;
    *out = l;
    return GRAFT_OK;
}

graft_status graft_image_files(graft_ctx *ctx, const char *dir, graft_file_list **out) {
    return list_files(ctx, dir, FILE_WALK_IMAGES, out);
}

graft_status graft_text_files(graft_ctx *ctx, const char *dir, graft_file_list **out) {
    return list_files(ctx, dir, FILE_WALK_TEXT, out);
}

int64_t graft_file_list_count(const graft_file_list *l) {
    return l ? l->w.n_paths : 0;
}

const char *graft_file_list_path(const graft_file_list *l, int64_t index) {
    return l && index >= 0 && index < l->w.n_paths ? l->w.paths[index] : NULL;
}

int64_t graft_file_list_note_count(const graft_file_list *l) {
    return l ? l->w.n_notes : 0;
}

graft_status graft_file_list_note(const graft_file_list *l, int64_t index, const char **path,
                                  const char **reason, int *skipped) {
    if (!l || index < 0 || index >= l->w.n_notes) return GRAFT_E_INVALID_ARGUMENT;
    const file_note *n = &l->w.notes[index];
    if (path) *path = n->path;
    if (reason) *reason = n->reason;
    if (skipped) *skipped = n->skipped;
    return GRAFT_OK;
}

void graft_file_list_free(graft_file_list *l) {
    if (!l) return;
    file_walk_free(&l->w);
    free(l);
}
