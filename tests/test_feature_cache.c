/* test_feature_cache.c: content hash (known answers, sensitivity; its speed reported) and the
 * feature cache (memory/file, f32/f16/bf16 and bf16's rounding, reuse, invalidation, truncation and
 * corruption). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/half.h"
#include "core/hash.h"
#include "test_feature_cache_util.h"

/* ---- hash ---- */

static void test_hash(void) {
    const char *abc = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    /* Known answers, computed once with this implementation and pinned: they must not change
     * (cache files written on one machine are checked on others). */
    struct {
        size_t len;
        uint64_t seed, want;
    } kat[] = {
        {0, 0, 0xa218b480d6998889ull},      {1, 0, 0x63cc6a91bb1c2710ull},
        {7, 0, 0x1e27ea3e09816635ull},      {8, 0, 0xfdfc288edfcd14a8ull},
        {31, 0, 0x5168f2c3e06242c1ull},     {32, 0, 0x89e400a249d6ca8aull},
        {33, 0, 0xe88345279f1c51eeull},     {62, 0, 0x5bd7a188c855746bull},
        {62, 12345, 0xd48a3032a31c7b63ull},
    };
    int kat_bad = 0;
    for (size_t t = 0; t < sizeof kat / sizeof kat[0]; t++) {
        uint64_t h = hash64(abc, kat[t].len, kat[t].seed);
        if (getenv("PRINT_KAT"))
            printf("        {%zu, %llu, 0x%016llxull},\n", kat[t].len,
                   (unsigned long long)kat[t].seed, (unsigned long long)h);
        if (h != kat[t].want) kat_bad++;
    }
    CHECK("hash_known_answers", kat_bad == 0, "%d of the pinned hash values differ", kat_bad);

    /* Streaming in any split equals one shot. */
    uint8_t buf[1000];
    for (int i = 0; i < 1000; i++) buf[i] = (uint8_t)(i * 7 + (i >> 3));
    uint64_t whole = hash64(buf, sizeof buf, 7);
    if (getenv("PRINT_KAT")) printf("  long: 0x%016llxull\n", (unsigned long long)whole);
    CHECK("hash_known_answer_long", whole == 0x7f01f8e36db5b799ull, "got 0x%016llx",
          (unsigned long long)whole);
    int split_bad = 0;
    for (size_t step = 1; step < 70; step += 3) {
        hash64_state s;
        hash64_init(&s, 7);
        for (size_t off = 0; off < sizeof buf; off += step)
            hash64_update(&s, buf + off, off + step > sizeof buf ? sizeof buf - off : step);
        split_bad += hash64_final(&s) != whole;
    }
    CHECK("hash_streaming_equals_oneshot", split_bad == 0, "%d splits differ", split_bad);

    /* Every single-bit flip, and every length, changes the hash. */
    int same = 0;
    for (int i = 0; i < 1000; i++)
        for (int b = 0; b < 8; b += 3) {
            buf[i] ^= (uint8_t)(1u << b);
            same += hash64(buf, sizeof buf, 7) == whole;
            buf[i] ^= (uint8_t)(1u << b);
        }
    for (size_t len = 0; len < 1000; len++) same += hash64(buf, len, 7) == whole;
    uint8_t zeros[64] = {0};
    for (size_t len = 1; len < 64; len++)
        same += hash64(zeros, len, 0) == hash64(zeros, len - 1, 0);
    CHECK("hash_sensitivity", same == 0, "%d changed inputs kept the hash", same);

    /* Avalanche: flipping one input bit flips about half of the 64 output bits. */
    double flips = 0;
    uint64_t base = hash64(buf, 64, 0);
    for (int i = 0; i < 64 * 8; i++) {
        buf[i / 8] ^= (uint8_t)(1u << (i % 8));
        flips += __builtin_popcountll(hash64(buf, 64, 0) ^ base);
        buf[i / 8] ^= (uint8_t)(1u << (i % 8));
    }
    flips /= 64 * 8;
    CHECK("hash_avalanche", flips > 28 && flips < 36, "mean flipped bits %.2f of 64", flips);
}

/* Speed: reported, never asserted (a shared machine's timing is no test). */
static void report_hash_speed(void) {
    size_t big = (size_t)64 << 20;
    uint8_t *mem = malloc(big);
    if (!mem) return;
    memset(mem, 0x5a, big);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    volatile uint64_t sink = hash64(mem, big, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    (void)sink;
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("# hash64: %.2f GB/s\n", (double)big / s / 1e9);
    free(mem);
}

/* bf16 storage rounds each value exactly as f32_to_bf16 does: ties to even, NaN kept (quiet),
 * infinities, signed zeros, subnormals, the largest finite values (rounding up to infinity). */
static void test_bf16_rounding(void) {
    const uint32_t bits[] = {0x00000000u, 0x80000000u, 0x3f808000u, 0x3f818000u, 0x3f807fffu,
                             0x3f808001u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u,
                             0xff812345u, 0x7f7fffffu, 0xff7fffffu, 0x00000001u, 0x807fffffu,
                             0x3f800000u, 0xbf7fffffu, 0x42f6e979u, 0x7f7f8000u};
    enum { K = sizeof bits / sizeof bits[0] };
    float x[K], back[K];
    for (int k = 0; k < K; k++) memcpy(&x[k], &bits[k], 4);
    feature_cache_key key = {0x77, "cut", "prep"};
    feature_cache *fc = NULL;
    feature_cache_reason why;
    graft_err e = {0};
    bool found = false;
    if (feature_cache_open(&fc, &why, NULL, &key, 1, K, GRAFT_DTYPE_BF16, &e) != GRAFT_OK ||
        feature_cache_put(fc, 0, x, &e) != GRAFT_OK ||
        feature_cache_get(fc, back, &found, 0, &e) != GRAFT_OK || !found) {
        CHECK("bf16_rounding_as_f32_to_bf16", 0, "%s", e.msg);
        feature_cache_close(fc, NULL);
        return;
    }
    int bad = -1;
    for (int k = 0; k < K && bad < 0; k++) {
        float want = bf16_to_f32(f32_to_bf16(x[k]));
        if (memcmp(&want, &back[k], 4) != 0) bad = k;
    }
    CHECK("bf16_rounding_as_f32_to_bf16", bad < 0, "value %d (0x%08x) differs", bad,
          bad >= 0 ? bits[bad] : 0u);
    feature_cache_close(fc, NULL);
}

/* ---- cache ---- */

static void test_memory(graft_dtype storage, const char *name, double tol) {
    feature_cache_key key = {0x1234, "cut", "prep"};
    feature_cache *fc = NULL;
    feature_cache_reason why = FEATURE_CACHE_REUSED;
    graft_err e = {0};
    if (feature_cache_open(&fc, &why, NULL, &key, N, D, storage, &e) != GRAFT_OK) {
        CHECK(name, 0, "open: %s", e.msg);
        return;
    }
    float r[D];
    bool found = true;
    feature_cache_get(fc, r, &found, 3, NULL);
    bool empty_ok = !found && feature_cache_misses(fc) == 1 && !feature_cache_has(fc, 3) &&
                    why == FEATURE_CACHE_NEW;
    fill(fc, 0, N - 1);
    bool partial = !feature_cache_complete(fc) && feature_cache_count(fc) == N - 1;
    fill(fc, N - 1, N);
    fill(fc, 5, 6); /* overwrite keeps the count */
    double err = max_rel_err(fc, N);
    CHECK(name,
          empty_ok && partial && feature_cache_complete(fc) && feature_cache_count(fc) == N &&
              err >= 0 && err <= tol && feature_cache_hits(fc) == N,
          "empty_ok %d partial %d count %lld err %g (tol %g) hits %lld", empty_ok, partial,
          (long long)feature_cache_count(fc), err, tol, (long long)feature_cache_hits(fc));
    feature_cache_close(fc, NULL);
}

static void test_file_reuse(graft_dtype storage, const char *tag, double tol) {
    char path[256], name[96];
    tmp_path(path, sizeof path, tag);
    unlink(path);
    feature_cache_key key = {0xfeedbeefcafe0001ull, "layer4|avg", "resize=224;mean=0.485"};
    feature_cache_reason why;
    feature_cache *fc = open_file(path, &key, storage, &why);
    snprintf(name, sizeof name, "file_new_%s", tag);
    CHECK(name, fc && why == FEATURE_CACHE_NEW, "reason %d", fc ? (int)why : -1);
    if (!fc) return;
    fill(fc, 0, N);
    feature_cache_close(fc, NULL);

    fc = open_file(path, &key, storage, &why);
    snprintf(name, sizeof name, "file_reuse_%s", tag);
    double err = fc ? max_rel_err(fc, N) : -1;
    CHECK(name,
          fc && why == FEATURE_CACHE_REUSED && feature_cache_complete(fc) && err >= 0 &&
              err <= tol && feature_cache_misses(fc) == 0 && feature_cache_hits(fc) == N,
          "reason %s (%s), err %g, misses %lld", feature_cache_reason_str(why),
          feature_cache_reason_detail(fc), err, (long long)feature_cache_misses(fc));
    feature_cache_close(fc, NULL);
    unlink(path);
}

/* A partially filled cache survives a close and is completed on the next run. */
static void test_file_partial(void) {
    char path[256];
    tmp_path(path, sizeof path, "partial");
    unlink(path);
    feature_cache_key key = {42, "c", "p"};
    feature_cache_reason why;
    feature_cache *fc = open_file(path, &key, GRAFT_DTYPE_F32, &why);
    if (!fc) return;
    fill(fc, 0, 10);
    feature_cache_close(fc, NULL);
    fc = open_file(path, &key, GRAFT_DTYPE_F32, &why);
    bool ok = fc && why == FEATURE_CACHE_REUSED && feature_cache_count(fc) == 10 &&
              feature_cache_has(fc, 9) && !feature_cache_has(fc, 10);
    fill(fc, 10, N);
    feature_cache_close(fc, NULL);
    fc = open_file(path, &key, GRAFT_DTYPE_F32, &why);
    ok = ok && fc && why == FEATURE_CACHE_REUSED && feature_cache_complete(fc) &&
         max_rel_err(fc, N) == 0;
    CHECK("file_partial_then_complete", ok, "reason %s (%s)", feature_cache_reason_str(why),
          feature_cache_reason_detail(fc));
    feature_cache_close(fc, NULL);
    unlink(path);
}

/* Writes a full cache at path under key, reopens it under `other` and checks the reason. */
/* A complete f32 file of N rows under key at the temporary path for name (in path); false when
 * it could not be made. */
static bool complete_file(char *path, size_t size, const char *name, const feature_cache_key *key) {
    tmp_path(path, size, name);
    unlink(path);
    feature_cache_reason why;
    feature_cache *fc = open_file(path, key, GRAFT_DTYPE_F32, &why);
    if (!fc) return false;
    fill(fc, 0, N);
    feature_cache_close(fc, NULL);
    return true;
}

static void expect_rebuild(const char *name, const feature_cache_key *key,
                           const feature_cache_key *other, graft_dtype st2, int64_t n2,
                           feature_cache_reason want) {
    char path[256];
    if (!complete_file(path, sizeof path, name, key)) return;
    feature_cache_reason why;
    graft_err e = {0};
    feature_cache *fc = NULL;
    graft_status s = feature_cache_open(&fc, &why, path, other, n2, D, st2, &e);
    int64_t has = 0; /* the old rows' bits cleared (the file is reused, not truncated) */
    for (int64_t i = 0; i < n2; i++) has += feature_cache_has(fc, i);
    CHECK(name, s == GRAFT_OK && why == want && feature_cache_count(fc) == 0 && has == 0,
          "status %d reason %s (%s), count %lld, rows marked present %lld", s,
          feature_cache_reason_str(why), feature_cache_reason_detail(fc),
          (long long)feature_cache_count(fc), (long long)has);
    /* refilled and closed, the rebuilt file is reused whole */
    fill(fc, 0, n2);
    feature_cache_close(fc, NULL);
    fc = NULL;
    s = feature_cache_open(&fc, &why, path, other, n2, D, st2, &e);
    CHECK(name, s == GRAFT_OK && why == FEATURE_CACHE_REUSED && feature_cache_count(fc) == n2,
          "reopened after the rebuild: status %d reason %s (%s)", s, feature_cache_reason_str(why),
          feature_cache_reason_detail(fc));
    feature_cache_close(fc, NULL);
    unlink(path);
}

static void test_invalidation(void) {
    feature_cache_key key = {7, "cutA", "prepA"};
    feature_cache_key model = {8, "cutA", "prepA"}, cut = {7, "cutB", "prepA"},
                      prep = {7, "cutA", "prepB"};
    expect_rebuild("rebuild_model_changed", &key, &model, GRAFT_DTYPE_F32, N,
                   FEATURE_CACHE_REBUILT_KEY_CHANGED);
    expect_rebuild("rebuild_cut_changed", &key, &cut, GRAFT_DTYPE_F32, N,
                   FEATURE_CACHE_REBUILT_KEY_CHANGED);
    expect_rebuild("rebuild_preprocessing_changed", &key, &prep, GRAFT_DTYPE_F32, N,
                   FEATURE_CACHE_REBUILT_KEY_CHANGED);
    expect_rebuild("rebuild_dtype_changed", &key, &key, GRAFT_DTYPE_F16, N,
                   FEATURE_CACHE_REBUILT_SHAPE_CHANGED);
    expect_rebuild("rebuild_count_changed", &key, &key, GRAFT_DTYPE_F32, N + 1,
                   FEATURE_CACHE_REBUILT_SHAPE_CHANGED);
}

/* A folder of caches names each set's file from its key and storage: the same settings give the
 * same name, any change another. */
static void test_file_names(void) {
    feature_cache_key keys[] = {
        {7, "cutA", "prepA"}, {8, "cutA", "prepA"}, {7, "cutB", "prepA"}, {7, "cutA", "prepB"}};
    char names[5][64], again[64];
    for (int i = 0; i < 4; i++)
        feature_cache_file_name(names[i], sizeof names[i], &keys[i], GRAFT_DTYPE_F32);
    feature_cache_file_name(names[4], sizeof names[4], &keys[0], GRAFT_DTYPE_BF16);
    feature_cache_file_name(again, sizeof again, &(feature_cache_key){7, "cutA", "prepA"},
                            GRAFT_DTYPE_F32);
    int distinct = 1;
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++) distinct &= strcmp(names[i], names[j]) != 0;
    CHECK("file_name_per_key", distinct && !strcmp(names[0], again), "%s %s %s %s %s / %s",
          names[0], names[1], names[2], names[3], names[4], again);
    CHECK("file_name_form",
          strlen(names[0]) == strlen("features-0123456789abcdef.cache") &&
              !strncmp(names[0], "features-", 9) && !strcmp(names[0] + 25, ".cache"),
          "%s", names[0]);
}

/* Damage a finished cache file with `damage`, reopen, expect CORRUPT, then a good rebuild. */
static void expect_corrupt(const char *name, void (*damage)(const char *path)) {
    char path[256];
    feature_cache_key key = {99, "cut", "prep"};
    feature_cache_reason why;
    feature_cache *fc;
    if (!complete_file(path, sizeof path, name, &key)) return;
    damage(path);
    fc = open_file(path, &key, GRAFT_DTYPE_F32, &why);
    bool detected = fc && why == FEATURE_CACHE_REBUILT_CORRUPT && feature_cache_count(fc) == 0;
    char detail[256];
    snprintf(detail, sizeof detail, "%s", feature_cache_reason_detail(fc));
    if (fc) fill(fc, 0, N);
    feature_cache_close(fc, NULL);
    fc = open_file(path, &key, GRAFT_DTYPE_F32, &why);
    bool rebuilt = fc && why == FEATURE_CACHE_REUSED && max_rel_err(fc, N) == 0;
    CHECK(name, detected && rebuilt, "detected %d (%s), rebuilt then reused %d", detected, detail,
          rebuilt);
    printf("  %s: %s\n", name, detail);
    feature_cache_close(fc, NULL);
    unlink(path);
}

static void damage_truncate(const char *path) {
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    if (truncate(path, size - 100) != 0) printf("  truncate failed\n");
}

static void damage_truncate_header(const char *path) {
    if (truncate(path, 50) != 0) printf("  truncate failed\n");
}

static void flip_byte(const char *path, long offset_from_end, long offset) {
    FILE *f = fopen(path, "r+b");
    fseek(f, 0, SEEK_END);
    long pos = offset_from_end ? ftell(f) - offset_from_end : offset;
    fseek(f, pos, SEEK_SET);
    int c = fgetc(f);
    fseek(f, pos, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
}

static void damage_payload_byte(const char *path) {
    flip_byte(path, 7 * D, 0); /* inside a row near the end */
}

static void damage_header_byte(const char *path) {
    flip_byte(path, 0, 41); /* inside n */
}

static void damage_bitmap_byte(const char *path) {
    flip_byte(path, 0, 4096); /* first byte of the present-bitmap */
}

/* A writer that "crashes": a file left dirty (opened, rows put, never synced/closed) is not
 * trusted. The child process leaves without closing, as a crash would. */
static void test_crash(void) {
    char path[256];
    feature_cache_key key = {5, "c", "p"};
    feature_cache_reason why;
    feature_cache *fc;
    if (!complete_file(path, sizeof path, "crash", &key)) return; /* a good, complete file */
    pid_t pid = fork();
    if (pid == 0) {
        feature_cache *c = open_file(path, &key, GRAFT_DTYPE_F32, &why);
        float r[D] = {0};
        feature_cache_put(c, 3, r, NULL);
        _exit(0); /* no close: the header still says dirty */
    }
    int status = 0;
    waitpid(pid, &status, 0);
    fc = open_file(path, &key, GRAFT_DTYPE_F32, &why);
    CHECK("crash_mid_write_detected", fc && why == FEATURE_CACHE_REBUILT_CORRUPT, "reason %s (%s)",
          feature_cache_reason_str(why), feature_cache_reason_detail(fc));
    feature_cache_close(fc, NULL);
    unlink(path);
}

/* A file of the format before (version 1: the payload checksummed as one stream) is rebuilt as
 * a storage change, with the reason saying so, not as a damaged file. */
static void test_old_version(void) {
    char path[256];
    feature_cache_key key = {9, "c", "p"};
    feature_cache_reason why;
    feature_cache *fc;
    if (!complete_file(path, sizeof path, "old_version", &key)) return;
    FILE *f = fopen(path, "r+b");
    const unsigned char v1[4] = {1, 0, 0, 0}; /* the version field, little-endian, at byte 8 */
    bool patched = f && fseek(f, 8, SEEK_SET) == 0 && fwrite(v1, 1, 4, f) == 4;
    if (f) fclose(f);
    fc = open_file(path, &key, GRAFT_DTYPE_F32, &why);
    const char *detail = fc ? feature_cache_reason_detail(fc) : "";
    CHECK("old_version_rebuilt",
          patched && fc && why == FEATURE_CACHE_REBUILT_SHAPE_CHANGED && strstr(detail, "older") &&
              feature_cache_count(fc) == 0,
          "reason %s (%s)", feature_cache_reason_str(why), detail);
    feature_cache_close(fc, NULL);
    unlink(path);
}

static void test_bad_args(void) {
    feature_cache_key key = {1, "c", "p"};
    feature_cache *fc = NULL;
    graft_err e = {0};
    graft_status s1 = feature_cache_open(&fc, NULL, NULL, &key, N, 0, GRAFT_DTYPE_F32, &e);
    graft_status s2 = feature_cache_open(&fc, NULL, NULL, &key, 0, D, GRAFT_DTYPE_F32, &e);
    graft_status s3 = feature_cache_open(&fc, NULL, NULL, &key, N, D, GRAFT_DTYPE_I32, &e);
    graft_status s4 = feature_cache_open(&fc, NULL, NULL, NULL, N, D, GRAFT_DTYPE_F32, &e);
    graft_status s5 =
        feature_cache_open(&fc, NULL, NULL, &key, INT64_MAX / 2, D, GRAFT_DTYPE_F32, &e);
    CHECK("bad_open_args",
          s1 == GRAFT_E_INVALID_ARGUMENT && s2 == GRAFT_E_INVALID_ARGUMENT && s3 == GRAFT_E_DTYPE &&
              s4 == GRAFT_E_INVALID_ARGUMENT && s5 == GRAFT_E_OUT_OF_MEMORY && fc == NULL,
          "statuses %d %d %d %d %d", s1, s2, s3, s4, s5);
    feature_cache_open(&fc, NULL, NULL, &key, N, D, GRAFT_DTYPE_F32, &e);
    float r[D] = {0};
    bool found;
    graft_status p1 = feature_cache_put(fc, N, r, &e);
    char msg[GRAFT_ERR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", e.msg);
    graft_status p2 = feature_cache_put(fc, -1, r, &e);
    graft_status g1 = feature_cache_get(fc, r, &found, N, &e);
    graft_status g2 = feature_cache_get(fc, NULL, &found, 0, &e);
    CHECK("bad_row_args",
          p1 == GRAFT_E_INVALID_ARGUMENT && p2 == GRAFT_E_INVALID_ARGUMENT &&
              g1 == GRAFT_E_INVALID_ARGUMENT && g2 == GRAFT_E_INVALID_ARGUMENT &&
              strstr(msg, "out of range") && !feature_cache_has(fc, N) &&
              !feature_cache_has(fc, -1),
          "statuses %d %d %d %d, msg '%s'", p1, p2, g1, g2, msg);
    feature_cache_close(fc, NULL);
    char path[256];
    s1 = feature_cache_open(&fc, NULL, "/nonexistent-dir/x/cache.bin", &key, N, D, GRAFT_DTYPE_F32,
                            &e);
    CHECK("bad_path", s1 == GRAFT_E_IO && fc == NULL, "status %d", s1);
    (void)path;
}

/* ---- graph hash ---- */

/* Y = MatMul(X, W) + B, with W (2, 2) and B (2) constants; `variant` changes one thing. */
static int build_graph(ir_graph *g, int variant) {
    graft_err e = {0};
    ir_graph_init(g);
    int x, w, b, m, y;
    if (ir_add_value(g, "X", &x, &e) || ir_add_value(g, "W", &w, &e) ||
        ir_add_value(g, "B", &b, &e) || ir_add_value(g, "M", &m, &e) ||
        ir_add_value(g, variant == 4 ? "Y2" : "Y", &y, &e))
        return 0;
    int64_t dims[2] = {2, 2};
    g->values[x].dtype = GRAFT_DTYPE_F32;
    g->values[x].ndim = 2;
    g->values[x].dims[0] = -1;
    g->values[x].dims[1] = 2;
    g->values[x].is_graph_input = true;
    if (tensor_make(&g->values[w].data, GRAFT_DTYPE_F32, 2, dims, &e) ||
        tensor_make(&g->values[b].data, GRAFT_DTYPE_F32, 1, dims, &e))
        return 0;
    float wv[4] = {1, 2, 3, 4}, bv[2] = {0.5f, -0.5f};
    memcpy(g->values[w].data.data, wv, sizeof wv);
    memcpy(g->values[b].data.data, bv, sizeof bv);
    if (variant == 1) ((uint8_t *)g->values[w].data.data)[5] ^= 1; /* one weight byte */
    g->values[w].is_const = g->values[b].is_const = true;
    g->values[y].is_graph_output = true;
    const char *ops[2] = {variant == 2 ? "Gemm" : "MatMul", "Add"};
    int ins[2][2] = {{x, w}, {m, b}}, outs[2] = {m, y};
    for (int k = 0; k < 2; k++) {
        ir_node n = {0};
        n.op_type = ir_strdup(ops[k]);
        n.domain = ir_strdup("");
        n.name = ir_strdup(k ? "add" : "mm");
        n.n_in = 2;
        n.n_out = 1;
        n.inputs = malloc(2 * sizeof(int));
        n.outputs = malloc(sizeof(int));
        n.inputs[0] = ins[k][variant == 3 && k == 1 ? 1 : 0]; /* variant 3: swapped wiring */
        n.inputs[1] = ins[k][variant == 3 && k == 1 ? 0 : 1];
        n.outputs[0] = outs[k];
        n.opset = 17;
        if (ir_add_node(g, &n, NULL, &e)) return 0;
    }
    g->inputs = malloc(sizeof(int));
    g->outputs = malloc(sizeof(int));
    g->inputs[0] = x;
    g->outputs[0] = y;
    g->n_inputs = g->n_outputs = 1;
    return 1;
}

static void test_graph_hash(void) {
    ir_graph g[6];
    uint64_t h[6];
    int built = 0;
    for (int v = 0; v < 6; v++) {
        built += build_graph(&g[v], v == 5 ? 0 : v);
        h[v] = feature_cache_model_hash(&g[v]);
    }
    CHECK("graph_hash_deterministic", built == 6 && h[0] == h[5], "%016llx vs %016llx",
          (unsigned long long)h[0], (unsigned long long)h[5]);
    CHECK("graph_hash_weight_byte", h[1] != h[0], "unchanged");
    CHECK("graph_hash_op_type", h[2] != h[0], "unchanged");
    CHECK("graph_hash_wiring", h[3] != h[0], "unchanged");
    CHECK("graph_hash_output_name", h[4] != h[0], "unchanged");
    /* A cut (the graph output moved to M) changes it too. */
    g[5].outputs[0] = 3;
    CHECK("graph_hash_cut", feature_cache_model_hash(&g[5]) != h[0], "unchanged");
    for (int v = 0; v < 6; v++) ir_graph_free(&g[v]);
}

/* Two writers on one file would corrupt it: the second open is refused while the first holds it. */
static void test_lock(void) {
    char path[256];
    tmp_path(path, sizeof path, "lock");
    unlink(path);
    feature_cache_key key = {3, "c", "p"};
    feature_cache_reason why;
    feature_cache *a = open_file(path, &key, GRAFT_DTYPE_F32, &why), *b = NULL;
    graft_err e = {0};
    graft_status s = feature_cache_open(&b, &why, path, &key, N, D, GRAFT_DTYPE_F32, &e);
    CHECK("file_locked_while_open", a && s == GRAFT_E_IO && !b, "status %d: %s", s, e.msg);
    feature_cache_close(a, NULL);
    feature_cache_close(b, NULL);
    unlink(path);
}

/* The features array of a large set (host_alloc_large): 2 MiB-aligned, zeroed, writable to its
 * last byte, freed with free(); below the threshold a plain 64-byte-aligned block. */
static void test_large_array(void) {
    size_t bytes = HOST_LARGE_BYTES + 12345;
    unsigned char *p = host_alloc_large(bytes), *q = host_alloc_large(1000);
    bool ok = p && q && (uintptr_t)p % ((size_t)2 << 20) == 0 && (uintptr_t)q % 64 == 0;
    size_t nonzero = 0;
    for (size_t i = 0; ok && i < bytes; i += 4093) nonzero += p[i] != 0;
    if (ok) {
        nonzero += p[bytes - 1] != 0;
        memset(p, 0xA5, bytes);
        memset(q, 0x5A, 1000);
    }
    CHECK("features_array_large", ok && nonzero == 0 && p[bytes - 1] == 0xA5 && q[999] == 0x5A,
          "allocated %d/%d, aligned %d, %zu nonzero bytes sampled", p != NULL, q != NULL, ok,
          nonzero);
    free(p), free(q);
}

int main(void) {
    test_hash();
    report_hash_speed();
    test_bf16_rounding();
    test_graph_hash();
    test_memory(GRAFT_DTYPE_F32, "memory_f32_exact", 0.0);
    test_memory(GRAFT_DTYPE_F16, "memory_f16", 1.0 / 1024);
    test_memory(GRAFT_DTYPE_BF16, "memory_bf16", 1.0 / 128);
    test_file_reuse(GRAFT_DTYPE_F32, "f32", 0.0);
    test_file_reuse(GRAFT_DTYPE_F16, "f16", 1.0 / 1024);
    test_file_reuse(GRAFT_DTYPE_BF16, "bf16", 1.0 / 128);
    test_file_partial();
    test_invalidation();
    test_file_names();
    expect_corrupt("corrupt_truncated", damage_truncate);
    expect_corrupt("corrupt_truncated_header", damage_truncate_header);
    expect_corrupt("corrupt_payload_byte", damage_payload_byte);
    expect_corrupt("corrupt_header_byte", damage_header_byte);
    expect_corrupt("corrupt_bitmap_byte", damage_bitmap_byte);
    test_crash();
    test_old_version();
    test_bad_args();
    test_lock();
    test_large_array();
    return test_failures ? 1 : 0;
}
