/* test_image_files.c: which files an image folder holds (graft_image_files and
 * graft_dataset_open_images): nested folders recursed in torchvision's order, only image names
 * (any case), hidden files and folders left out, formats graft does not decode skipped and
 * reported, link loops and links to '.' or to another class not entered twice and listed
 * among the skipped files (tests/test_file_walk.c has the other hostile entries).
 *   test_image_files SCRATCH_DIR  (made afresh) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graft.h"
#include "test_util.h"

static char root[512];

/* root/rel with its folders made; bytes (n of them) as its content. */
static void put(const char *rel, const void *bytes, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++)
        if (*p == '/') *p = 0, mkdir(path, 0777), *p = '/';
    FILE *f = fopen(path, "wb");
    if (f) fwrite(bytes, 1, n, f), fclose(f);
}

static void link_at(const char *target, const char *rel) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    if (symlink(target, path) != 0) printf("  symlink %s: %s\n", path, strerror(errno));
}

static void make_tree(void) {
    static const unsigned char png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    put("a/x.jpg", "", 0);
    put("a/B.JPG", "", 0);
    put("a/notes.txt", "text", 4);
    put("a/.hidden.jpg", "", 0);
    put("a/.hid/w.jpg", "", 0);
    put("a/pic.bmp", "BM\0\0", 4);
    put("a/real.webp", png, sizeof png); /* a PNG under another image name is read */
    put("a/sub/y.png", "", 0);
    put("a/sub/deeper/z.jpeg", "", 0);
    put("a/sub-x/k.jpg", "", 0);
    put("b/q.png", "", 0);
    put(".hiddenclass/r.jpg", "", 0);
    put("at_root.jpg", "", 0);
    link_at(".", "a/self");
    link_at("..", "a/up");
    link_at("nowhere.jpg", "a/dangling.jpg");
    link_at("nowhere.txt", "a/dangling.txt");
    link_at("../a", "b/to_a");
}

/* Whether the listing's paths (after root/) are exactly want, in order. */
static int same_paths(const graft_file_list *l, const char *const *want, int n) {
    int ok = graft_file_list_count(l) == n;
    for (int i = 0; i < graft_file_list_count(l); i++) {
        const char *p = graft_file_list_path(l, i);
        printf("  %s\n", p);
        ok = ok && i < n && strncmp(p, root, strlen(root)) == 0 &&
             strcmp(p + strlen(root) + 1, want[i]) == 0;
    }
    return ok;
}

/* Count the notes whose path ends in one of `ends` and whose skipped flag is `skipped`. */
static int notes_matching(const graft_file_list *l, const char *const *ends, int n, int skipped) {
    int found = 0;
    for (int64_t i = 0; i < graft_file_list_note_count(l); i++) {
        const char *p, *why;
        int s;
        graft_file_list_note(l, i, &p, &why, &s);
        printf("  note %s (%s): %s\n", p, s ? "skipped" : "not entered", why);
        for (int k = 0; k < n; k++) {
            size_t lp = strlen(p), le = strlen(ends[k]);
            found += s == skipped && lp >= le && strcmp(p + lp - le, ends[k]) == 0;
        }
    }
    return found;
}

static void listing(graft_ctx *ctx) {
    static const char *const want[] = {"a/B.JPG",          "a/real.webp",   "a/x.jpg",
                                       "a/sub/y.png",      "a/sub-x/k.jpg", "a/sub/deeper/z.jpeg",
                                       "a/up/at_root.jpg", "a/up/b/q.png"};
    static const char *const skipped[] = {"a/dangling.jpg", "a/dangling.txt", "a/pic.bmp"};
    static const char *const loops[] = {"a/self", "a/up/a", "a/up/b/to_a"};
    char dir[600];
    snprintf(dir, sizeof dir, "%s/a", root);
    graft_file_list *l = NULL;
    graft_status st = graft_image_files(ctx, dir, &l);
    CHECK("image_files_open", st == GRAFT_OK, "%s", graft_last_error(ctx));
    if (st != GRAFT_OK) return;
    CHECK("image_files_recursive_sorted_images_only", same_paths(l, want, 8),
          "%lld files (want 8, in torchvision's order)", (long long)graft_file_list_count(l));
    CHECK("image_files_unsupported_and_dangling_skipped",
          notes_matching(l, skipped, 3, 1) == 3 && graft_file_list_note_count(l) == 6, "%lld notes",
          (long long)graft_file_list_note_count(l));
    CHECK("image_files_loops_not_entered_twice", notes_matching(l, loops, 3, 0) == 3,
          "the links to '.', '..' and back to a were not all noted");
    graft_file_list_free(l);
    snprintf(dir, sizeof dir, "%s/nothere", root);
    st = graft_image_files(ctx, dir, &l);
    CHECK("image_files_missing_folder",
          st == GRAFT_E_IO && strstr(graft_last_error(ctx), "nothere") && !l, "status %d: %s", st,
          graft_last_error(ctx));
}

/* Enough folders to grow the set of folders entered several times; a link back at the end. */
static void many_folders(graft_ctx *ctx) {
    char rel[64], dir[600];
    for (int i = 0; i < 300; i++) {
        snprintf(rel, sizeof rel, "many/d%03d/f.png", i);
        put(rel, "", 0);
    }
    link_at("..", "many/d299/back");
    snprintf(dir, sizeof dir, "%s/many", root);
    graft_file_list *l = NULL;
    graft_status st = graft_image_files(ctx, dir, &l);
    const char *last = st == GRAFT_OK ? graft_file_list_path(l, 299) : NULL;
    CHECK("image_files_many_folders",
          st == GRAFT_OK && graft_file_list_count(l) == 300 && graft_file_list_note_count(l) == 1 &&
              last && strstr(last, "many/d299/f.png"),
          "status %d: %lld files, %lld notes", st, (long long)graft_file_list_count(l),
          (long long)graft_file_list_note_count(l));
    graft_file_list_free(l);
}

static void dataset(graft_ctx *ctx) {
    graft_dataset *ds = NULL;
    graft_status st = graft_dataset_open_images(ctx, root, NULL, &ds);
    int64_t skipped = st == GRAFT_OK ? graft_dataset_skipped_count(ds) : -1;
    CHECK("image_folder_classes_and_nested_files",
          st == GRAFT_OK && graft_dataset_class_count(ds) == 2 && graft_dataset_size(ds) == 7 &&
              !strcmp(graft_dataset_class_name(ds, 0), "a"),
          "status %d (%s), %d classes, %lld samples (want 2 and 6 + 1)", st, graft_last_error(ctx),
          graft_dataset_class_count(ds), (long long)graft_dataset_size(ds));
    for (int64_t i = 0; i < skipped; i++) {
        const char *p, *why;
        graft_dataset_skipped(ds, i, &p, &why);
        printf("  skipped %s: %s\n", p, why);
    }
    CHECK("image_folder_skips_unreadable_images_and_loops", skipped == 6,
          "%lld skipped (want the BMP, two dangling links, a/self, a/up and b/to_a)",
          (long long)skipped);
    graft_dataset_free(ds);
    /* A class folder whose only image is a BMP: an error naming the format. */
    put("c/only.bmp", "BM\0\0", 4);
    put("c/readme.txt", "x", 1);
    st = graft_dataset_open_images(ctx, root, NULL, &ds);
    CHECK("image_folder_class_without_images",
          st == GRAFT_E_INVALID_ARGUMENT && strstr(graft_last_error(ctx), "no image files") &&
              strstr(graft_last_error(ctx), "BMP"),
          "status %d: %s", st, graft_last_error(ctx));
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_image_files SCRATCH_DIR\n");
        return 2;
    }
    snprintf(root, sizeof root, "%s", argv[1]);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", root, root);
    if (system(cmd) != 0) {
        CHECK("image_files_scratch", 0, "cannot make %s", root);
        return 1;
    }
    make_tree();
    graft_ctx *ctx;
    graft_ctx_create(NULL, &ctx);
    listing(ctx);
    dataset(ctx);
    many_folders(ctx); /* last: its folder would be one more class */
    graft_ctx_free(ctx);
    return test_failures ? 1 : 0;
}
