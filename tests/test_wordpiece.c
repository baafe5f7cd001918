/* test_wordpiece.c: the WordPiece tokenizer against Hugging Face BertTokenizer's ids recorded in
 * tests/data/tokenizer/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/wordpiece.h"
#include "test_util.h"

#define MAX_TOKENS 4096
enum { N_CONFIGS = 7 };
static const struct {
    const char *name;
    int lowercase, pair, max_len;
} CONFIGS[N_CONFIGS] = {{"uncased", 1, 0, 0},       {"cased", 0, 0, 0},
                        {"uncased_pair", 1, 1, 0},  {"cased_pair", 0, 1, 0},
                        {"uncased_16", 1, 0, 16},   {"uncased_pair_21", 1, 1, 21},
                        {"cased_pair_16", 0, 1, 16}};

/* The fixture's hash: FNV-1a over the little-endian int32 bytes of ids, types and mask. */
static unsigned fnv32(const int64_t *arrays[3], size_t n) {
    unsigned h = 2166136261u;
    for (int a = 0; a < 3; a++)
        for (size_t i = 0; i < n; i++) {
            unsigned v = (unsigned)(int32_t)arrays[a][i];
            for (int b = 0; b < 4; b++) h = (h ^ ((v >> (8 * b)) & 0xFF)) * 16777619u;
        }
    return h;
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (buf) buf[n] = 0;
    fclose(f);
    return buf;
}

/* Split buf into lines in place; returns the count (the empty piece after a final \n dropped). */
static size_t split_lines(char *buf, char ***out) {
    size_t n = 0, cap = 1024;
    char **lines = malloc(cap * sizeof *lines);
    for (char *p = buf; *p;) {
        char *nl = strchr(p, '\n');
        if (n == cap) lines = realloc(lines, (cap *= 2) * sizeof *lines);
        lines[n++] = p;
        if (!nl) break;
        *nl = 0;
        p = nl + 1;
    }
    *out = lines;
    return n;
}

static graft_status encode_line(const wordpiece *wp, char *line, int pair, int max_len,
                                int64_t *ids, int64_t *types, int64_t *mask, size_t *n,
                                graft_err *e) {
    char *b = NULL, *tab = pair ? strchr(line, '\t') : NULL;
    if (pair) b = tab ? tab + 1 : (char *)"";
    if (tab) *tab = 0;
    graft_status st =
        wordpiece_encode(wp, line, b, max_len, false, ids, types, mask, MAX_TOKENS, n, e);
    if (tab) *tab = '\t';
    return st;
}

static void test_corpus(wordpiece *wps[2], const char *dir) {
    char path[1024], *corpus_buf, *exp_buf;
    snprintf(path, sizeof path, "%s/corpus.txt", dir);
    corpus_buf = read_all(path);
    snprintf(path, sizeof path, "%s/expected.txt", dir);
    exp_buf = read_all(path);
    if (!corpus_buf || !exp_buf) {
        CHECK("wordpiece_fixtures", 0, "cannot read %s/corpus.txt or expected.txt", dir);
        free(corpus_buf), free(exp_buf);
        return;
    }
    char **lines, **exp;
    size_t n_lines = split_lines(corpus_buf, &lines), n_exp = split_lines(exp_buf, &exp);
    CHECK("wordpiece_fixture_lines", n_exp == n_lines + 1 && n_lines >= 2000,
          "%zu corpus lines, %zu expected lines", n_lines, n_exp);
    static int64_t ids[MAX_TOKENS], types[MAX_TOKENS], mask[MAX_TOKENS];
    for (int c = 0; c < N_CONFIGS && n_exp == n_lines + 1; c++) {
        int bad = 0;
        char first[512] = "";
        for (size_t i = 0; i < n_lines; i++) {
            graft_err e = {0};
            size_t n = 0;
            graft_status st = encode_line(wps[CONFIGS[c].lowercase], lines[i], CONFIGS[c].pair,
                                          CONFIGS[c].max_len, ids, types, mask, &n, &e);
            const int64_t *arrays[3] = {ids, types, mask};
            unsigned want = (unsigned)strtoul(exp[i + 1] + 9 * c, NULL, 16);
            if (st == GRAFT_OK && fnv32(arrays, n) == want) continue;
            if (bad++ == 0) {
                int k = snprintf(first, sizeof first, "line %zu: %s;", i + 1, st ? e.msg : "ids");
                for (size_t j = 0; j < n && j < 40 && k < 400; j++)
                    k += snprintf(first + k, sizeof first - (size_t)k, " %lld", (long long)ids[j]);
            }
        }
        char name[64];
        snprintf(name, sizeof name, "wordpiece_%s", CONFIGS[c].name);
        CHECK(name, bad == 0, "%d of %zu lines differ from BertTokenizer; first: %s", bad, n_lines,
              first);
    }
    free(lines), free(exp), free(corpus_buf), free(exp_buf);
}

static void test_api(wordpiece *wp) {
    graft_err e = {0};
    int64_t *ids = NULL;
    size_t n = 0, cap = 0;
    graft_status st = wordpiece_tokenize(wp, "ok \xC3\x28 bad", 8, &ids, &n, &cap, &e);
    CHECK("wordpiece_bad_utf8", st == GRAFT_E_INVALID_ARGUMENT && strstr(e.msg, "byte offset 3"),
          "status %d, message '%s'", st, e.msg);
    st = wordpiece_tokenize(wp, "a\0b", 3, &ids, &n, &cap, &e); /* NUL is dropped: "ab" */
    CHECK("wordpiece_nul_dropped",
          st == GRAFT_OK && n == 1 && ids[0] == wordpiece_token_id(wp, "ab", 2),
          "status %d, %zu ids", st, n);
    free(ids);
    int64_t in[8], ty[8], mk[8];
    size_t len = 0;
    st = wordpiece_encode(wp, "hello", "world", 8, true, in, ty, mk, 8, &len, &e);
    int64_t pad = wordpiece_pad_id(wp);
    CHECK("wordpiece_pad",
          st == GRAFT_OK && len == 5 && in[5] == pad && in[7] == pad && mk[4] == 1 && mk[5] == 0 &&
              ty[2] == 0 && ty[3] == 1 && ty[4] == 1 && ty[5] == 0,
          "status %d len %zu: %s", st, len, e.msg);
    st = wordpiece_encode(wp, "hello world again", NULL, 0, false, in, ty, mk, 3, &len, &e);
    CHECK("wordpiece_small_buffer", st == GRAFT_E_INVALID_ARGUMENT, "status %d", st);
    st = wordpiece_encode(wp, "x", "y", 2, false, in, ty, mk, 8, &len, &e);
    CHECK("wordpiece_max_len_too_small", st == GRAFT_E_INVALID_ARGUMENT, "status %d", st);
    wordpiece *none = NULL;
    st = wordpiece_load(&none, "/nonexistent/vocab.txt", true, &e);
    CHECK("wordpiece_missing_vocab",
          st == GRAFT_E_IO && none == NULL && strstr(e.msg, "/nonexistent/vocab.txt"),
          "status %d: %s", st, e.msg);
}

/* An empty text (and one of only special tokens) gives no ids and no undefined behaviour (the
 * code points buffer is NULL then: UBSan flags any offset taken from it). */
static void test_empty_text(const wordpiece *wp) {
    int64_t *ids = NULL;
    size_t n = 7, cap = 0;
    graft_err e = {0};
    graft_status st = wordpiece_tokenize(wp, "", 0, &ids, &n, &cap, &e);
    CHECK("wordpiece_empty_text", st == GRAFT_OK && n == 0, "status %d, %zu ids: %s", st, n, e.msg);
    st = wordpiece_tokenize(wp, "[CLS][SEP]", 10, &ids, &n, &cap, &e);
    CHECK("wordpiece_only_specials", st == GRAFT_OK && n == 2, "status %d, %zu ids: %s", st, n,
          e.msg);
    free(ids);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "tests/data/tokenizer";
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    wordpiece *wps[2] = {NULL, NULL};
    graft_err e = {0};
    for (int lc = 0; lc < 2; lc++) {
        if (wordpiece_load(&wps[lc], path, lc, &e) != GRAFT_OK) {
            CHECK("wordpiece_load", 0, "%s", e.msg);
            return 1;
        }
    }
    CHECK("wordpiece_load", wordpiece_vocab_size(wps[0]) > 1000, "%d tokens",
          wordpiece_vocab_size(wps[0]));
    test_api(wps[1]);
    test_empty_text(wps[1]);
    test_corpus(wps, dir);
    wordpiece_free(wps[0]);
    wordpiece_free(wps[1]);
    return test_failures ? 1 : 0;
}
