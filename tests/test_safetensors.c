/* test_safetensors.c: safetensors round trips, hostile files, atomic writes, Python interop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"
#include "core/temp_files.h"
#include "train/safetensors.h"

static char dir[1024];

static void path_in(char *out, size_t size, const char *name) {
    snprintf(out, size, "%s/%s", dir, name);
}

static unsigned char *read_bytes(const char *path, size_t *size) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, fp) != (size_t)n) b = (free(b), NULL);
    fclose(fp);
    *size = (size_t)n;
    return b;
}

/* A valid file: f32 (2,3), f16 (4), bf16 (2,2), f64 scalar, i64 (3), i32 (2), u8 (5),
 * bool (3), an empty f32 (0, 4), and two metadata entries. */
static float f32v[6] = {1.5f, -2, 3.25f, 0, 1e-30f, 7};
static uint16_t f16v[4] = {0x3c00, 0xc000, 0x7bff, 0x0001};
static uint16_t bf16v[4] = {0x3f80, 0x4000, 0xbf80, 0x7f80};
static double f64v[1] = {3.141592653589793};
static int64_t i64v[3] = {-1, 0, 1234567890123LL};
static int32_t i32v[2] = {-7, 42};
static uint8_t u8v[5] = {0, 1, 2, 254, 255};
static uint8_t boolv[3] = {1, 0, 1};
static const int64_t d23[] = {2, 3}, d4[] = {4}, d22[] = {2, 2}, d3[] = {3}, d2[] = {2}, d5[] = {5},
                     d04[] = {0, 4};
#define N_T 9
static const st_tensor_in tens[N_T] = {
    {"weight", GRAFT_DTYPE_F32, 2, d23, f32v},     {"half", GRAFT_DTYPE_F16, 1, d4, f16v},
    {"brain", GRAFT_DTYPE_BF16, 2, d22, bf16v},    {"scalar", GRAFT_DTYPE_F64, 0, NULL, f64v},
    {"step", GRAFT_DTYPE_I64, 1, d3, i64v},        {"i32", GRAFT_DTYPE_I32, 1, d2, i32v},
    {"bytes \"q\"\n", GRAFT_DTYPE_U8, 1, d5, u8v}, {"mask", GRAFT_DTYPE_BOOL, 1, d3, boolv},
    {"empty", GRAFT_DTYPE_F32, 2, d04, NULL},
};
static const char *mkeys[] = {"format", "note\t\"x\""};
static const char *mvals[] = {"pt", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"};

static int check_contents(const safetensors_file *f, char *why, size_t wsize) {
    if (safetensors_count(f) != N_T) return snprintf(why, wsize, "count %d", safetensors_count(f));
    for (int i = 0; i < N_T; i++) {
        const st_tensor *t = safetensors_find(f, tens[i].name);
        if (!t) return snprintf(why, wsize, "no tensor %s", tens[i].name);
        if (t->dtype != tens[i].dtype || t->ndim != tens[i].ndim)
            return snprintf(why, wsize, "%s: dtype/rank", tens[i].name);
        size_t bytes = graft_dtype_size(t->dtype);
        for (int d = 0; d < t->ndim; d++) {
            if (t->dims[d] != tens[i].dims[d]) return snprintf(why, wsize, "%s: dims", t->name);
            bytes *= (size_t)t->dims[d];
        }
        if (t->nbytes != bytes || (bytes && memcmp(t->data, tens[i].data, bytes) != 0))
            return snprintf(why, wsize, "%s: data differs", t->name);
        if (((uintptr_t)t->data) % graft_dtype_size(t->dtype) != 0)
            return snprintf(why, wsize, "%s: misaligned", t->name);
    }
    if (safetensors_find(f, "nope")) return snprintf(why, wsize, "found a missing name");
    if (safetensors_meta_count(f) != 2) return snprintf(why, wsize, "meta count");
    for (int i = 0; i < 2; i++) {
        const char *v = safetensors_meta(f, mkeys[i]);
        if (!v || strcmp(v, mvals[i]) != 0) return snprintf(why, wsize, "meta %s", mkeys[i]);
    }
    return 0;
}

static void test_round_trip(void) {
    char path[1200], why[256] = "";
    graft_err err = {0};
    path_in(path, sizeof path, "graft.safetensors");
    graft_status st = safetensors_write(path, tens, N_T, mkeys, mvals, 2, &err);
    CHECK("write", st == GRAFT_OK, "%s", err.msg);
    safetensors_file *f = NULL;
    st = safetensors_open(&f, path, &err);
    CHECK("open", st == GRAFT_OK, "%s", err.msg);
    if (f) CHECK("round_trip", check_contents(f, why, sizeof why) == 0, "%s", why);
    size_t size = 0;
    unsigned char *b = read_bytes(path, &size);
    CHECK("header_padded", b && size >= 8 && (8 + (size_t)b[0] + ((size_t)b[1] << 8)) % 8 == 0,
          "header length not padded to 8");
    free(b);
    safetensors_free(f);
    /* no tensors, no metadata */
    path_in(path, sizeof path, "empty.safetensors");
    st = safetensors_write(path, NULL, 0, NULL, NULL, 0, &err);
    f = NULL;
    if (st == GRAFT_OK) st = safetensors_open(&f, path, &err);
    CHECK("empty_file",
          st == GRAFT_OK && safetensors_count(f) == 0 && safetensors_meta_count(f) == 0, "%s",
          err.msg);
    safetensors_free(f);
}

/* Expect bytes to be rejected with a message containing want. */
static void expect_bad(const char *name, const void *bytes, size_t size, const char *want) {
    safetensors_file *f = NULL;
    graft_err err = {0};
    graft_status st = safetensors_from_memory(&f, bytes, size, &err);
    CHECK(name, st == GRAFT_E_MALFORMED_MODEL && !f && strstr(err.msg, want),
          "status %d, message '%s' (wanted '%s')", (int)st, err.msg, want);
    safetensors_free(f);
}

/* A file made of a header text and nd data bytes. */
static size_t make_file(unsigned char *out, const char *header, size_t nd) {
    size_t n = strlen(header);
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(out + 8, header, n);
    memset(out + 8 + n, 0xab, nd);
    return 8 + n + nd;
}

static void test_hostile(void) {
    unsigned char buf[4096];
    size_t n;
    expect_bad("reject_short", "\x02\0\0", 3, "too short");
    n = make_file(buf, "{}", 0);
    buf[0] = 200;
    expect_bad("reject_header_len", buf, n, "beyond the end");
    n = make_file(buf, "{}", 0);
    memset(buf, 0xff, 8);
    expect_bad("reject_header_len_huge", buf, n, "beyond the end");
    const struct {
        const char *name, *header;
        size_t nd;
        const char *want;
    } cases[] = {
        {"reject_json_unclosed", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}",
         4, "expected ',' or '}'"},
        {"reject_json_garbage", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}x",
         4, "trailing"},
        {"reject_json_number", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}",
         4, "fraction"},
        {"reject_json_negative",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "non-negative"},
        {"reject_json_escape",
         "{\"a\\q\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "bad escape"},
        {"reject_json_key", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"offsets\":[0,4]}}", 4,
         "unknown key"},
        {"reject_json_missing", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "lacks"},
        {"reject_not_object", "[]", 0, "expected '{'"},
        {"reject_dtype", "{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
         "unsupported dtype"},
        {"reject_size_mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}",
         8, "data_offsets span"},
        {"reject_offsets_range", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         4, "outside"},
        {"reject_offsets_reversed",
         "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[3,1]}}", 4, "outside"},
        {"reject_offsets_overlap",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}",
         8, "overlap"},
        {"reject_offsets_gap", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         8, "gap"},
        {"reject_offsets_uncovered",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "cover 4 of the 8"},
        {"reject_duplicate",
         "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
         "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
         2, "duplicate tensor"},
        {"reject_meta_value", "{\"__metadata__\":{\"k\":1}}", 0, "must be strings"},
        {"reject_meta_duplicate", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "duplicate"},
        {"reject_rank",
         "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1,
         "more than 8"},
        {"reject_huge_shape",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[9223372036854775807,4],"
         "\"data_offsets\":[0,4]}}",
         4, "larger than the file"},
        {"reject_nul", "{\"a\\u0000\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
         "\\u0000"},
        {"reject_surrogate",
         "{\"\\ud800x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "surrogate"},
        {"reject_utf8", "{\"\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
         "UTF-8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        n = make_file(buf, cases[i].header, cases[i].nd);
        expect_bad(cases[i].name, buf, n, cases[i].want);
    }
    /* escapes and padding a writer may produce are accepted */
    n = make_file(buf,
                  "{ \"__metadata__\" : { \"k\\u00e9\\n\" : \"\\ud83d\\ude00\\/\" } ,"
                  "\"a\":{\"data_offsets\":[0,2],\"shape\":[],\"dtype\":\"F16\"}}   ",
                  2);
    safetensors_file *f = NULL;
    graft_err err = {0};
    graft_status st = safetensors_from_memory(&f, buf, n, &err);
    const char *v = f ? safetensors_meta(f, "k\xc3\xa9\n") : NULL;
    CHECK("accept_escapes",
          st == GRAFT_OK && v && strcmp(v, "\xf0\x9f\x98\x80/") == 0 && safetensors_find(f, "a") &&
              safetensors_find(f, "a")->numel == 1,
          "%s", err.msg);
    safetensors_free(f);
}

/* Every truncation and every single-byte corruption of a valid file: rejected or parsed, never
 * a crash (ASan watches). */
static void test_fuzz(void) {
    char path[1200];
    path_in(path, sizeof path, "graft.safetensors");
    size_t size = 0;
    unsigned char *b = read_bytes(path, &size);
    if (!b) {
        SKIP("truncations", "no graft.safetensors");
        return;
    }
    int accepted = 0;
    for (size_t cut = 0; cut < size; cut++) {
        safetensors_file *f = NULL;
        if (safetensors_from_memory(&f, b, cut, NULL) == GRAFT_OK) accepted++;
        safetensors_free(f);
    }
    CHECK("truncations", accepted == 0, "%d truncated files were accepted", accepted);
    size_t hlen = (size_t)b[0] | ((size_t)b[1] << 8);
    unsigned char *c = malloc(size);
    for (size_t i = 0; c && i < 8 + hlen; i++) {
        static const unsigned char subst[] = {0,   '"', '\\', '{', '}',  '[',
                                              ']', ',', ':',  '9', 0xff, ' '};
        for (size_t k = 0; k < sizeof subst; k++) {
            memcpy(c, b, size);
            c[i] = subst[k];
            safetensors_file *f = NULL;
            graft_err err = {0};
            if (safetensors_from_memory(&f, c, size, &err) != GRAFT_OK && err.msg[0] == 0)
                accepted = -1; /* rejected without a message */
            safetensors_free(f);
        }
    }
    CHECK("corruptions", accepted == 0, "a corrupted file was rejected without a message");
    free(c);
    free(b);
}

static void test_atomic(void) {
    char path[1200], why[256] = "";
    graft_err err = {0};
    path_in(path, sizeof path, "atomic.safetensors");
    FILE *fp = fopen(path, "wb");
    if (fp) fputs("old contents", fp), fclose(fp);
    graft_status st = safetensors_write(path, tens, N_T, mkeys, mvals, 2, &err);
    safetensors_file *f = NULL;
    if (st == GRAFT_OK) st = safetensors_open(&f, path, &err);
    CHECK("overwrite", st == GRAFT_OK && check_contents(f, why, sizeof why) == 0, "%s %s", err.msg,
          why);
    safetensors_free(f);
    /* no temporary files are left next to it */
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q 'tmp'", dir);
    CHECK("no_temp_left", system(cmd) != 0, "a temporary file was left in %s", dir);
    path_in(path, sizeof path, "missing-folder/x.safetensors");
    err.msg[0] = 0;
    st = safetensors_write(path, tens, N_T, NULL, NULL, 0, &err);
    char folder[1200];
    path_in(folder, sizeof folder, "missing-folder");
    struct stat sb;
    CHECK("missing_folder", st == GRAFT_E_IO && err.msg[0] && stat(folder, &sb) != 0,
          "status %d, '%s'", (int)st, err.msg);
    const st_tensor_in dup[2] = {tens[0], tens[0]};
    path_in(path, sizeof path, "dup.safetensors");
    st = safetensors_write(path, dup, 2, NULL, NULL, 0, &err);
    CHECK("write_rejects_duplicates", st == GRAFT_E_INVALID_ARGUMENT && access(path, F_OK) != 0,
          "status %d", (int)st);
}

/* A killed writer's temporary (unlocked) is removed by the next write; a live writer's (locked
 * through another open file description) is kept. */
static void test_stale_temps(void) {
    char path[1200], stale[1300], live[1300];
    graft_err err = {0};
    path_in(path, sizeof path, "resume.safetensors");
    snprintf(stale, sizeof stale, "%s.tmp.Ab12Cd", path);
    snprintf(live, sizeof live, "%s.tmp.Ef34Gh", path);
    FILE *fp = fopen(stale, "wb");
    if (fp) fputs("half a checkpoint", fp), fclose(fp);
    int held = open(live, O_WRONLY | O_CREAT, 0644);
    bool locked = held >= 0 && flock(held, LOCK_EX) == 0;
    graft_status st = safetensors_write(path, tens, N_T, mkeys, mvals, 2, &err);
    CHECK("stale_temp_removed", st == GRAFT_OK && access(stale, F_OK) != 0, "status %d, %s %s",
          (int)st, err.msg, access(stale, F_OK) == 0 ? "still there" : "");
    CHECK("live_temp_kept", locked && access(live, F_OK) == 0, "locked %d", (int)locked);
    if (held >= 0) close(held);
    fp = fopen(stale, "wb");
    if (fp) fputs("x", fp), fclose(fp);
    int removed = temp_files_remove_stale(path);
    CHECK("stale_temps_on_start",
          removed == 2 && access(stale, F_OK) != 0 && access(live, F_OK) != 0, "removed %d",
          removed);
}

/* A file written by the Python safetensors package (tools/check_safetensors.py write). */
static void test_python(void) {
    char path[1200];
    path_in(path, sizeof path, "python.safetensors");
    if (access(path, F_OK) != 0) {
        SKIP("python_interop", "no python.safetensors (run tools/check_safetensors.py write)");
        return;
    }
    safetensors_file *f = NULL;
    graft_err err = {0};
    graft_status st = safetensors_open(&f, path, &err);
    CHECK("python_open", st == GRAFT_OK, "%s", err.msg);
    if (!f) return;
    /* the script writes: a = arange(6, f32).reshape(2,3), b = [1, -2, 3] i64, c = f16 [0.5, 2],
     * d = bool [True, False], e = f64 scalar 2.5, metadata {"source": "python"} */
    const st_tensor *a = safetensors_find(f, "a"), *b = safetensors_find(f, "b");
    const st_tensor *c = safetensors_find(f, "c"), *d = safetensors_find(f, "d");
    const st_tensor *e = safetensors_find(f, "e");
    int ok = a && b && c && d && e && a->dtype == GRAFT_DTYPE_F32 && a->ndim == 2 &&
             a->dims[0] == 2 && a->dims[1] == 3 && b->dtype == GRAFT_DTYPE_I64 &&
             c->dtype == GRAFT_DTYPE_F16 && d->dtype == GRAFT_DTYPE_BOOL &&
             e->dtype == GRAFT_DTYPE_F64 && e->ndim == 0;
    if (ok) {
        float av[6];
        int64_t bv[3];
        uint16_t cv[2];
        double ev;
        memcpy(av, a->data, sizeof av), memcpy(bv, b->data, sizeof bv);
        memcpy(cv, c->data, sizeof cv), memcpy(&ev, e->data, sizeof ev);
        for (int i = 0; i < 6; i++) ok = ok && av[i] == (float)i;
        ok = ok && bv[0] == 1 && bv[1] == -2 && bv[2] == 3 && cv[0] == 0x3800 && cv[1] == 0x4000;
        ok = ok && ((const uint8_t *)d->data)[0] == 1 && ((const uint8_t *)d->data)[1] == 0;
        ok = ok && ev == 2.5;
    }
    const char *src = safetensors_meta(f, "source");
    CHECK("python_contents", ok && src && strcmp(src, "python") == 0,
          "tensors or metadata differ from what the script wrote");
    safetensors_free(f);
}

int main(int argc, char **argv) {
    snprintf(dir, sizeof dir, "%s", argc > 1 ? argv[1] : "build/test-logs/st");
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    if (system(cmd) != 0) {
        printf("FAIL setup: cannot create %s\n", dir);
        return 1;
    }
    test_round_trip();
    test_hostile();
    test_fuzz();
    test_atomic();
    test_stale_temps();
    test_python();
    return test_failures ? 1 : 0;
}
