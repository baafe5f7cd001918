/* file_list.c: listing image files by torchvision's ImageFolder rules, shared by image data
 * sets (graft_dataset_open_images) and `graft predict` (graft_image_files). */
#include "file_list.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

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

/* Whether the file starts as a JPEG or PNG does (a .bmp that is really a PNG is read). */
static bool decodable_content(const char *path) {
    unsigned char head[8] = {0};
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(head, 1, sizeof head, f) : 0;
    if (f) fclose(f);
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

static graft_status add_path(file_walk *w, char *path, graft_err *e) {
    graft_status st = grow((void **)&w->paths, &w->cap_paths, w->n_paths + 1, sizeof *w->paths, e);
    if (st != GRAFT_OK) return free(path), st;
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

/* The folders entered: an open-addressing hash set of (device, inode), kept at most half full
 * (a tree may hold many folders). Returns the slot of id, or of the empty place for it. */
static int64_t seen_slot(const file_walk *w, folder_id id) {
    uint64_t h = ((uint64_t)id.ino * 0x9e3779b97f4a7c15ull) ^ (uint64_t)id.dev;
    int64_t mask = w->cap_seen - 1, i = (int64_t)(h & (uint64_t)mask);
    while (w->seen[i].used && (w->seen[i].dev != id.dev || w->seen[i].ino != id.ino))
        i = (i + 1) & mask;
    return i;
}

static graft_status seen_grow(file_walk *w, graft_err *e) {
    file_walk bigger = {.cap_seen = w->cap_seen ? w->cap_seen * 2 : 64};
    bigger.seen = calloc((size_t)bigger.cap_seen, sizeof *bigger.seen);
    if (!bigger.seen) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory listing files");
    for (int64_t i = 0; i < w->cap_seen; i++)
        if (w->seen[i].used) bigger.seen[seen_slot(&bigger, w->seen[i])] = w->seen[i];
    free(w->seen);
    w->seen = bigger.seen, w->cap_seen = bigger.cap_seen;
    return GRAFT_OK;
}

graft_status file_walk_mark(file_walk *w, const char *dir, bool *already, graft_err *e) {
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return err_set(e, GRAFT_E_IO, "cannot open folder '%s': %s", dir, strerror(errno));
    if (2 * (w->n_seen + 1) > w->cap_seen) TRY(seen_grow(w, e));
    folder_id id = {sb.st_dev, sb.st_ino, true};
    int64_t slot = seen_slot(w, id);
    *already = w->seen[slot].used;
    if (!*already) w->seen[slot] = id, w->n_seen++;
    return GRAFT_OK;
}

static char *join(const char *dir, const char *name) {
    size_t len = strlen(dir) + strlen(name) + 2;
    char *p = malloc(len);
    if (p) snprintf(p, len, "%s/%s", dir, name);
    return p;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* torchvision's order, sorted(os.walk(...)) then sorted names: by folder path, then name. */
static int cmp_walk_order(const void *a, const void *b) {
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    size_t dx = (size_t)(strrchr(x, '/') - x), dy = (size_t)(strrchr(y, '/') - y);
    int c = memcmp(x, y, dx < dy ? dx : dy);
    if (c || dx != dy) return c ? c : (dx < dy ? -1 : 1);
    return strcmp(x + dx + 1, y + dy + 1);
}

/* The names in dir, hidden ones (a leading '.') left out, sorted; NULL with errno set when the
 * folder cannot be read. */
static char **read_names(const char *dir, int64_t *n) {
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **v = NULL;
    int64_t cap = 0;
    struct dirent *ent;
    bool ok = true;
    *n = 0;
    while (ok && (ent = readdir(d)) != NULL) {
        if (ent->d_name[0] == '.') continue;
        ok = grow((void **)&v, &cap, *n + 1, sizeof *v, &(graft_err){0}) == GRAFT_OK &&
             (v[*n] = strdup(ent->d_name)) != NULL;
        *n += ok;
    }
    closedir(d);
    if (!ok) {
        file_names_free(v, *n);
        errno = ENOMEM;
        return NULL;
    }
    if (*n) qsort(v, (size_t)*n, sizeof *v, cmp_str);
    return v ? v : calloc(1, sizeof *v);
}

void file_names_free(char **names, int64_t n) {
    for (int64_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* One entry of a folder being listed: a subfolder (entered unless seen), a file (listed,
 * noted or ignored by its name), or something unreadable. */
static graft_status walk_dir(file_walk *w, const char *dir, bool top, graft_err *e);

static graft_status walk_entry(file_walk *w, char *path, const char *name, graft_err *e) {
    struct stat sb;
    char why[320];
    int ext = image_ext(name);
    graft_status st = GRAFT_OK;
    if (stat(path, &sb) != 0) {
        /* a dangling link, or no permission: worth a note only where an image was meant */
        snprintf(why, sizeof why, "cannot read: %s", strerror(errno));
        if (ext >= 0) st = add_note(w, path, true, why, e);
    } else if (S_ISDIR(sb.st_mode)) {
        bool already;
        st = file_walk_mark(w, path, &already, e);
        if (st == GRAFT_OK && already)
            st = add_note(
                w, path, false,
                "a folder already listed, reached again through a link: not entered twice", e);
        else if (st == GRAFT_OK)
            st = walk_dir(w, path, false, e);
    } else if (S_ISREG(sb.st_mode) && ext >= 0) {
        if (!image_exts[ext][1] || decodable_content(path))
            return add_path(w, path, e); /* takes path */
        snprintf(why, sizeof why, "%s images are not supported (graft decodes JPEG and PNG)",
                 image_exts[ext][1]);
        st = add_note(w, path, true, why, e);
    }
    free(path);
    return st;
}

/* Below the top folder an unreadable folder is noted; the top one is an error. */
static graft_status walk_dir(file_walk *w, const char *dir, bool top, graft_err *e) {
    int64_t n = 0;
    char **names = read_names(dir, &n);
    if (!names) {
        if (errno == ENOMEM)
            return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory listing '%s'", dir);
        if (top) return err_set(e, GRAFT_E_IO, "cannot open folder '%s': %s", dir, strerror(errno));
        char why[320];
        snprintf(why, sizeof why, "cannot open folder: %s", strerror(errno));
        return add_note(w, dir, true, why, e);
    }
    graft_status st = GRAFT_OK;
    for (int64_t i = 0; i < n && st == GRAFT_OK; i++) {
        char *path = join(dir, names[i]);
        st = path ? walk_entry(w, path, names[i], e)
                  : err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory listing '%s'", dir);
    }
    file_names_free(names, n);
    return st;
}

graft_status file_walk_images(file_walk *w, const char *dir, graft_err *e) {
    bool already;
    TRY(file_walk_mark(w, dir, &already, e));
    int64_t start = w->n_paths;
    TRY(walk_dir(w, dir, true, e));
    if (w->n_paths > start)
        qsort(w->paths + start, (size_t)(w->n_paths - start), sizeof *w->paths, cmp_walk_order);
    return GRAFT_OK;
}

void file_walk_free(file_walk *w) {
    if (!w) return;
    file_names_free(w->paths, w->n_paths);
    for (int64_t i = 0; i < w->n_notes; i++) free(w->notes[i].path), free(w->notes[i].reason);
    free(w->notes);
    free(w->seen);
    memset(w, 0, sizeof *w);
}

graft_status file_list_subdirs(const char *dir, char ***names, int64_t *n, graft_err *e) {
    int64_t count = 0, kept = 0;
    char **v = read_names(dir, &count);
    if (!v)
        return errno == ENOMEM
                   ? err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory listing '%s'", dir)
                   : err_set(e, GRAFT_E_IO, "cannot open folder '%s': %s", dir, strerror(errno));
    for (int64_t i = 0; i < count; i++) {
        char *path = join(dir, v[i]);
        struct stat sb;
        bool is_dir = path && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
        free(path);
        if (is_dir)
            v[kept++] = v[i];
        else
            free(v[i]);
    }
    *names = v, *n = kept;
    return GRAFT_OK;
}

/* ---- the public listing ------------------------------------------------------------------ */

struct graft_file_list {
    file_walk w;
};

graft_status graft_image_files(graft_ctx *ctx, const char *dir, graft_file_list **out) {
    if (!ctx) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &ctx->err;
    err_clear(e);
    if (!dir || !out) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "no folder given");
    *out = NULL;
    graft_file_list *l = calloc(1, sizeof *l);
    if (!l) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    graft_status st = file_walk_images(&l->w, dir, e);
    if (st != GRAFT_OK) return graft_file_list_free(l), st;
    *out = l;
    return GRAFT_OK;
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
