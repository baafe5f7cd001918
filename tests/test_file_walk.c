/* test_file_walk.c: the folder walker (src/data/file_list.c) on hostile folders: link loops, a
 * link to '.', a file reached twice (link and hard link), dangling links, a chain of links that
 * loops, a FIFO (never opened), for image folders, .txt folders and text class folders, and the
 * depth and entry limits with their errors. Every listing and every reason is checked exactly.
 *   test_file_walk SCRATCH_DIR  (made afresh) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/file_list.h"
#include "data/text_table.h"
#include "graft.h"
#include "test_util.h"

static char root[512];

/* root/rel with its folders made, holding text. */
static void put(const char *rel, const char *text) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++)
        if (*p == '/') *p = 0, mkdir(path, 0777), *p = '/';
    FILE *f = fopen(path, "wb");
    if (f) fputs(text, f), fclose(f);
}

static void make(const char *kind, const char *target, const char *rel) {
    char path[1024], to[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(to, sizeof to, "%s/%s", root, target ? target : "");
    int rc = !strcmp(kind, "fifo")   ? mkfifo(path, 0666)
             : !strcmp(kind, "hard") ? link(to, path)
                                     : symlink(target, path);
    if (rc != 0) printf("  %s %s: %s\n", kind, path, strerror(errno));
}

/* The hostile entries of one folder (name: the file name suffix the walk lists). */
static void make_tree(const char *top, const char *ext) {
    char a[256], b[256], c[256], rel[256], to[256];
    snprintf(a, sizeof a, "%s/a%s", top, ext);
    snprintf(b, sizeof b, "%s/b%s", top, ext);
    snprintf(c, sizeof c, "%s/sub/c%s", top, ext);
    put(a, "\xff\xd8\xff text a"), put(b, "text b"), put(c, "text c");
    snprintf(rel, sizeof rel, "%s/other.dat", top), put(rel, "x");
    snprintf(rel, sizeof rel, "%s/sub/loop", top), make("symlink", "..", rel);
    snprintf(rel, sizeof rel, "%s/self", top), make("symlink", ".", rel);
    snprintf(rel, sizeof rel, "%s/twice%s", top, ext), snprintf(to, sizeof to, "a%s", ext);
    make("symlink", to, rel);
    snprintf(rel, sizeof rel, "%s/hard%s", top, ext), make("hard", b, rel);
    snprintf(rel, sizeof rel, "%s/gone%s", top, ext), make("symlink", "nowhere", rel);
    snprintf(rel, sizeof rel, "%s/pipe%s", top, ext), make("fifo", NULL, rel);
    snprintf(rel, sizeof rel, "%s/chain1", top), make("symlink", "chain2", rel);
    snprintf(rel, sizeof rel, "%s/chain2", top), make("symlink", "chain1", rel);
}

/* Whether got (after root/) is want; prints both when not. */
static int same(const char *got, const char *want) {
    size_t n = strlen(root);
    int ok = got && !strncmp(got, root, n) && got[n] == '/' && !strcmp(got + n + 1, want);
    if (!ok) printf("  got  %s\n  want %s/%s\n", got ? got : "(none)", root, want);
    return ok;
}

/* The expected reasons, with "@" standing for root. */
static void expand(char *out, size_t size, const char *want) {
    size_t k = 0;
    for (const char *p = want; *p && k + 1 < size; p++) {
        if (*p == '@')
            k += (size_t)snprintf(out + k, size - k, "%s", root);
        else
            out[k++] = *p;
        if (k >= size) k = size - 1;
    }
    out[k] = 0;
}

/* Notes as "path|reason|skipped" lines, checked against want (n of them). */
static int same_notes(const file_note *notes, int64_t count, const char *const *want, int n) {
    int ok = count == n;
    for (int64_t i = 0; i < count; i++) {
        char got[8400], exp[8400] = "";
        size_t r = strlen(root);
        snprintf(got, sizeof got, "%s|%s|%d",
                 notes[i].path + (strncmp(notes[i].path, root, r) ? 0 : r + 1), notes[i].reason,
                 notes[i].skipped);
        if (i < n) expand(exp, sizeof exp, want[i]);
        if (i >= n || strcmp(got, exp)) {
            printf("  note %lld: %s\n       want %s\n", (long long)i, got, exp);
            ok = 0;
        }
    }
    return ok;
}

static void images(void) {
    static const char *const notes[] = {
        "img/chain1|link loop (a chain of links that leads back to itself)|1",
        "img/chain2|link loop (a chain of links that leads back to itself)|1",
        "img/gone.jpg|dangling link (to 'nowhere', which does not exist)|1",
        "img/hard.jpg|same file as '@/img/b.jpg' (listed once)|0",
        "img/pipe.jpg|not a regular file (a FIFO; not opened)|1",
        "img/self|link loop: leads back to '@/img' (not entered again)|0",
        "img/sub/loop|link loop: leads back to '@/img' (not entered again)|0",
        "img/twice.jpg|same file as '@/img/a.jpg' (listed once)|0",
    };
    char dir[600];
    snprintf(dir, sizeof dir, "%s/img", root);
    file_walk w = {.kind = FILE_WALK_IMAGES};
    graft_err e = {0};
    graft_status st = file_walk_dir(&w, dir, &e);
    CHECK("walk_images_finishes", st == GRAFT_OK, "%s", e.msg);
    CHECK("walk_images_each_file_once",
          w.n_paths == 3 && same(w.paths[0], "img/a.jpg") && same(w.paths[1], "img/b.jpg") &&
              same(w.paths[2], "img/sub/c.jpg"),
          "%lld files", (long long)w.n_paths);
    CHECK("walk_images_every_entry_left_out_noted", same_notes(w.notes, w.n_notes, notes, 8),
          "%lld notes (want 8)", (long long)w.n_notes);
    file_walk_free(&w);
}

static void texts(graft_ctx *ctx) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/txt", root);
    graft_file_list *l = NULL;
    graft_status st = graft_text_files(ctx, dir, &l);
    CHECK("walk_text_finishes", st == GRAFT_OK, "%s", graft_last_error(ctx));
    if (st != GRAFT_OK) return;
    CHECK("walk_text_each_file_once_depth_first",
          graft_file_list_count(l) == 3 && same(graft_file_list_path(l, 0), "txt/a.txt") &&
              same(graft_file_list_path(l, 1), "txt/b.txt") &&
              same(graft_file_list_path(l, 2), "txt/sub/c.txt"),
          "%lld files", (long long)graft_file_list_count(l));
    const char *path, *why;
    int skipped, n_skipped = 0, n_repeats = 0;
    for (int64_t i = 0; i < graft_file_list_note_count(l); i++) {
        graft_file_list_note(l, i, &path, &why, &skipped);
        n_skipped += skipped, n_repeats += !skipped;
    }
    CHECK("walk_text_notes", n_skipped == 4 && n_repeats == 4, "%d skipped, %d repeats", n_skipped,
          n_repeats);
    graft_file_list_free(l);
}

/* A text class folder: a class linking to '.', one linking to another class, a subfolder, a
 * FIFO and a file reached twice, all among the skipped samples with their reasons. */
static void text_classes(void) {
    static const char *const want[] = {
        "tc/alias|same folder as '@/tc/pos' (listed once)|0",
        "tc/loop|link loop: leads back to '@/tc' (not entered again)|0",
        "tc/neg/pipe.txt|not a regular file (a FIFO; not opened)|1",
        "tc/pos/self|a folder (the files of a class folder are read, not its subfolders)|1",
        "tc/pos/twice.txt|same file as '@/tc/pos/a.txt' (listed once)|0",
    };
    put("tc/neg/b.txt", "bad"), put("tc/pos/a.txt", "good");
    make("fifo", NULL, "tc/neg/pipe.txt");
    make("symlink", ".", "tc/pos/self");
    make("symlink", "a.txt", "tc/pos/twice.txt");
    make("symlink", ".", "tc/loop");
    make("symlink", "pos", "tc/alias");
    char dir[600];
    snprintf(dir, sizeof dir, "%s/tc", root);
    text_table *t = NULL;
    graft_err e = {0};
    graft_status st = text_table_load_folder(&t, dir, NULL, &e);
    CHECK("walk_text_classes_finish", st == GRAFT_OK, "%s", e.msg);
    if (st != GRAFT_OK) return;
    file_note notes[8];
    int64_t n = text_table_skipped_count(t) < 8 ? text_table_skipped_count(t) : 8;
    for (int64_t i = 0; i < n; i++) {
        const text_skip *s = text_table_skipped(t, i);
        bool repeat = strstr(s->reason, "same ") || strstr(s->reason, "leads back");
        notes[i] = (file_note){s->path, s->reason, !repeat};
    }
    CHECK("walk_text_classes_two_classes",
          text_table_count(t) == 2 && text_table_class_count(t) == 2 &&
              !strcmp(text_table_class_name(t, 0), "neg") &&
              !strcmp(text_table_class_name(t, 1), "pos"),
          "%lld rows, %d classes", (long long)text_table_count(t), text_table_class_count(t));
    CHECK("walk_text_classes_skipped_listed", same_notes(notes, n, want, 5), "%lld skipped",
          (long long)text_table_skipped_count(t));
    text_table_free(t);
}

static void limits(graft_ctx *ctx) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/img", root);
    file_walk w = {.kind = FILE_WALK_IMAGES, .max_entries = 5};
    graft_err e = {0};
    graft_status st = file_walk_dir(&w, dir, &e);
    CHECK("walk_entry_limit",
          st == GRAFT_E_INVALID_ARGUMENT && strstr(e.msg, "more than 5 entries") &&
              strstr(e.msg, "/img'"),
          "status %d: %s", st, e.msg);
    file_walk_free(&w);
    /* 64 folders below the top one are fine; 65 are an error naming the deepest. */
    char rel[1100] = "deep";
    for (int i = 0; i < 64; i++) strcat(rel, "/d");
    strcat(rel, "/x.jpg");
    put(rel, "");
    snprintf(dir, sizeof dir, "%s/deep", root);
    graft_file_list *l = NULL;
    st = graft_image_files(ctx, dir, &l);
    CHECK("walk_depth_64_fine", st == GRAFT_OK && graft_file_list_count(l) == 1, "status %d: %s",
          st, graft_last_error(ctx));
    graft_file_list_free(l);
    l = NULL;
    snprintf(rel, sizeof rel, "%s/deep", root);
    char cmd[2800];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/top' && mv '%s' '%s/top/'", root, rel, root);
    int moved = system(cmd) == 0;
    snprintf(dir, sizeof dir, "%s/top", root);
    st = graft_image_files(ctx, dir, &l);
    CHECK("walk_depth_65_error",
          moved && st == GRAFT_E_INVALID_ARGUMENT && !l &&
              strstr(graft_last_error(ctx), "nested more than 64 deep"),
          "status %d: %s", st, graft_last_error(ctx));
    graft_file_list_free(l);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_file_walk SCRATCH_DIR\n");
        return 2;
    }
    snprintf(root, sizeof root, "%s", argv[1]);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", root, root);
    if (system(cmd) != 0) {
        CHECK("walk_scratch", 0, "cannot make %s", root);
        return 1;
    }
    make_tree("img", ".jpg");
    make_tree("txt", ".txt");
    graft_ctx *ctx;
    graft_ctx_create(NULL, &ctx);
    images();
    texts(ctx);
    text_classes();
    limits(ctx);
    graft_ctx_free(ctx);
    return test_failures ? 1 : 0;
}
