/* tokenizer_api.c: graft_tokenizer: a vocab.txt's WordPiece, a tokenizer.json pipeline, vocab.json
 * + merges.txt or a SentencePiece .model, told apart by content, behind one handle with the bytes
 * it was built from (internal calls in tokenizer.h, public ones in graft.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/context.h"
#include "data/hf_load.h"
#include "data/hf_tokenizer.h"
#include "data/tokenizer.h"
#include "data/unicode.h"
#include "data/wordpiece.h"

enum { KIND_VOCAB_TXT, KIND_JSON, KIND_BPE_FILES, KIND_SPM }; /* graft_tokenizer_is_json's */

struct graft_tokenizer {
    wordpiece *wp;    /* a vocab.txt, or */
    hf_tokenizer *hf; /* a tokenizer.json, vocab.json + merges.txt or SentencePiece .model */
    int kind;
    char *data; /* what graft_tokenizer_load_memory builds it again from (NUL-terminated) */
    size_t size;
};

static size_t skip_ws(const char *d, size_t n, size_t i) {
    while (i < n && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r')) i++;
    return i;
}

/* vocab.json: a JSON object whose first member's value is a number ({"<s>": 0, ...}). */
static bool is_vocab_json(const char *d, size_t n) {
    size_t i = skip_ws(d, n, 0);
    if (i == n || d[i++] != '{') return false;
    i = skip_ws(d, n, i);
    if (i == n || d[i++] != '"') return false;
    for (; i < n && d[i] != '"'; i++)
        if (d[i] == '\\') i++;
    i = skip_ws(d, n, i + 1);
    if (i >= n || d[i++] != ':') return false;
    i = skip_ws(d, n, i);
    return i < n && (d[i] == '-' || (d[i] >= '0' && d[i] <= '9'));
}

static bool is_utf8(const char *d, size_t n) {
    uint32_t cp;
    for (size_t pos = 0; pos < n;)
        if (utf8_decode(d, n, &pos, &cp)) return false;
    return true;
}

/* A SentencePiece model: named *.model, or a protobuf (field 1, length-delimited) with a NUL byte
 * early on or bytes that are not UTF-8 (a text vocabulary has neither). */
static bool is_spm(const char *path, const char *d, size_t n) {
    size_t len = path ? strlen(path) : 0;
    if (len > 6 && !strcmp(path + len - 6, ".model")) return true;
    if (n <= 2 || d[0] != 0x0a) return false;
    return memchr(d, 0, n < 4096 ? n : 4096) != NULL || !is_utf8(d, n);
}

/* vocab.json + merges.txt in one: {"vocab.json": ..., "merges.txt": ...} (either first). */
static bool is_bpe_bundle(const char *d, size_t n) {
    static const char *const keys[] = {"\"vocab.json\"", "\"merges.txt\""};
    size_t i = skip_ws(d, n, 0);
    if (i == n || d[i++] != '{') return false;
    i = skip_ws(d, n, i);
    for (int k = 0; k < 2; k++) {
        size_t len = strlen(keys[k]);
        if (n - i > len && !memcmp(d + i, keys[k], len) && skip_ws(d, n, i + len) < n &&
            d[skip_ws(d, n, i + len)] == ':')
            return true;
    }
    return false;
}

bool tokenizer_is_json(const char *data, size_t size) {
    size_t i = 0;
    while (i < size && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r'))
        i++;
    if (i == size || data[i] != '{' || is_vocab_json(data, size)) return false;
    static const char key[] = "\"model\"";
    for (size_t k = i; k + sizeof key - 1 <= size; k++)
        if (data[k] == '"' && memcmp(data + k, key, sizeof key - 1) == 0) return true;
    return false;
}

graft_status tokenizer_load_memory(graft_tokenizer **out, const char *data, size_t size,
                                   const char *name, bool lowercase, graft_err *e) {
    *out = NULL;
    graft_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "%s: out of memory", name);
    graft_status st = GRAFT_OK;
    if (!(t->data = malloc(size + 1)))
        st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "%s: out of memory", name);
    else
        memcpy(t->data, data, size), t->data[size] = 0, t->size = size;
    if (st != GRAFT_OK)
        ;
    else if (is_spm(NULL, data, size))
        st = hf_from_spm(&t->hf, (const unsigned char *)data, size, name, e), t->kind = KIND_SPM;
    else if (is_bpe_bundle(data, size))
        st = hf_from_bpe_bundle(&t->hf, data, size, name, e), t->kind = KIND_BPE_FILES;
    else if (is_vocab_json(data, size))
        st = err_set(e, GRAFT_E_INVALID_ARGUMENT,
                     "%s: a vocab.json needs its merges.txt: load it from its folder", name);
    else if (tokenizer_is_json(data, size))
        st = hf_tokenizer_load(&t->hf, data, size, name, e), t->kind = KIND_JSON;
    else
        st = wordpiece_load_memory(&t->wp, data, size, name, lowercase, e);
    if (st != GRAFT_OK) {
        free(t->data), free(t);
        return st;
    }
    *out = t;
    return GRAFT_OK;
}

/* What a tokenizer file is, by its name, for messages. */
static const char *file_kind(const char *path) {
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    size_t len = strlen(base);
    if (len > 6 && !strcmp(base + len - 6, ".model")) return "SentencePiece model";
    if (!strcmp(base, "vocab.json")) return "vocab.json";
    if (len > 5 && !strcmp(base + len - 5, ".json")) return "tokenizer.json";
    return "vocabulary";
}

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The tokenizer file in a folder: tokenizer.json, vocab.json (with merges.txt), a SentencePiece
 * model, vocab.txt; the first there. */
static graft_status pick_in_dir(const char *dir, char *out, size_t cap, graft_err *e) {
    static const char *const names[] = {
        "tokenizer.json", "vocab.json",      "spiece.model", "sentencepiece.bpe.model",
        "spm.model",      "tokenizer.model", "vocab.txt"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        if ((size_t)snprintf(out, cap, "%s/%s", dir, names[k]) >= cap)
            return err_set(e, GRAFT_E_INVALID_ARGUMENT, "%s: path too long", dir);
        if (is_file(out)) return GRAFT_OK;
    }
    return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                   "%s: the folder has no tokenizer.json, vocab.json + merges.txt, SentencePiece "
                   "model (spiece.model, sentencepiece.bpe.model, spm.model, tokenizer.model) or "
                   "vocab.txt",
                   dir);
}

/* vocab.json + the merges.txt beside it. */
static graft_status load_bpe_files(graft_tokenizer *t, const char *path, const char *vocab,
                                   size_t size, graft_err *e) {
    char merges_path[4096];
    const char *slash = strrchr(path, '/');
    int dir_len = slash ? (int)(slash - path) : 1;
    if ((size_t)snprintf(merges_path, sizeof merges_path, "%.*s/merges.txt", dir_len,
                         slash ? path : ".") >= sizeof merges_path)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "%s: path too long", path);
    if (!is_file(merges_path))
        return err_set(e, GRAFT_E_IO, "%s: a vocab.json needs merges.txt beside it; %s is missing",
                       path, merges_path);
    char *merges = NULL;
    size_t msize = 0;
    TRY(tokenizer_read_file(merges_path, "merges.txt", &merges, &msize, e));
    graft_status st = hf_from_bpe_files(&t->hf, vocab, size, merges, msize, path, &t->data, e);
    free(merges);
    t->kind = KIND_BPE_FILES;
    if (t->data) t->size = strlen(t->data);
    return st;
}

graft_status tokenizer_load(graft_tokenizer **out, const char *path, bool lowercase, graft_err *e) {
    size_t size = 0;
    *out = NULL;
    char picked[4096], *data = NULL;
    if (is_dir(path)) {
        TRY(pick_in_dir(path, picked, sizeof picked, e));
        path = picked;
    }
    TRY(tokenizer_read_file(path, file_kind(path), &data, &size, e));
    graft_status st;
    if (is_spm(path, data, size) || is_vocab_json(data, size)) {
        graft_tokenizer *t = calloc(1, sizeof *t);
        if (!t) {
            st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "%s: out of memory", path);
        } else if (is_spm(path, data, size)) {
            st = hf_from_spm(&t->hf, (const unsigned char *)data, size, path, e);
            t->kind = KIND_SPM, t->data = data, t->size = size, data = NULL; /* t keeps them */
        } else {
            st = load_bpe_files(t, path, data, size, e);
        }
        if (st == GRAFT_OK)
            *out = t;
        else
            tokenizer_free(t);
    } else {
        st = tokenizer_load_memory(out, data, size, path, lowercase, e);
    }
    free(data);
    return st;
}

void tokenizer_free(graft_tokenizer *t) {
    if (!t) return;
    wordpiece_free(t->wp);
    hf_tokenizer_free(t->hf);
    free(t->data);
    free(t);
}

graft_status tokenizer_encode(const graft_tokenizer *t, const char *a, const char *b, int max_len,
                              bool pad, int64_t *input_ids, int64_t *type_ids, int64_t *mask,
                              size_t cap, size_t *out_len, graft_err *e) {
    if (t->hf)
        return hf_encode(t->hf, a, b, max_len, pad, input_ids, type_ids, mask, cap, out_len, e);
    return wordpiece_encode(t->wp, a, b, max_len, pad, input_ids, type_ids, mask, cap, out_len, e);
}

graft_status graft_tokenizer_load(graft_ctx *ctx, const char *vocab_path, int cased,
                                  graft_tokenizer **out) {
    if (!ctx) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &ctx->err;
    err_clear(e);
    if (!vocab_path || !out) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "no vocab path given");
    return tokenizer_load(out, vocab_path, !cased, e);
}

graft_status graft_tokenizer_load_memory(graft_ctx *ctx, const char *vocab, size_t size, int cased,
                                         graft_tokenizer **out) {
    if (!ctx) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &ctx->err;
    err_clear(e);
    if (!vocab || !out) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "no vocabulary given");
    return tokenizer_load_memory(out, vocab, size, "the vocabulary", !cased, e);
}

int64_t graft_tokenizer_token_id(const graft_tokenizer *tok, const char *token) {
    if (!tok || !token) return -1;
    return tok->hf ? hf_token_id(tok->hf, token, strlen(token))
                   : wordpiece_token_id(tok->wp, token, strlen(token));
}

const char *graft_tokenizer_token(const graft_tokenizer *tok, int64_t id) {
    if (!tok) return NULL;
    if (!tok->hf) return wordpiece_token(tok->wp, id);
    return id >= 0 && id < tok->hf->n_ids ? tok->hf->id_tokens[id] : NULL;
}

int64_t graft_tokenizer_special_id(const graft_tokenizer *tok, graft_token_role role) {
    static const char *const bert[GRAFT_TOKEN_ROLE_COUNT] = {"[CLS]", "[SEP]", "[PAD]", "[UNK]"};
    if (!tok || (unsigned)role >= GRAFT_TOKEN_ROLE_COUNT) return -1;
    if (!tok->hf) return wordpiece_token_id(tok->wp, bert[role], strlen(bert[role]));
    const hf_tokenizer *h = tok->hf;
    return role == GRAFT_TOKEN_CLS   ? h->cls
           : role == GRAFT_TOKEN_SEP ? h->sep
           : role == GRAFT_TOKEN_PAD ? h->pad
                                     : h->unk;
}

int graft_tokenizer_is_json(const graft_tokenizer *tok) {
    return tok ? tok->kind : 0;
}

const char *graft_tokenizer_data(const graft_tokenizer *tok, size_t *size) {
    if (size) *size = tok ? tok->size : 0;
    return tok ? tok->data : NULL;
}

graft_status graft_tokenizer_encode(graft_ctx *ctx, const graft_tokenizer *tok, const char *a,
                                    const char *b, int max_len, int pad, int64_t *ids,
                                    int64_t *type_ids, int64_t *mask, size_t cap, size_t *len) {
    if (!ctx) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &ctx->err;
    err_clear(e);
    if (!tok || !a || !ids || !len)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "graft_tokenizer_encode: NULL argument");
    return tokenizer_encode(tok, a, b, max_len, pad != 0, ids, type_ids, mask, cap, len, e);
}

void graft_tokenizer_free(graft_tokenizer *tok) {
    tokenizer_free(tok);
}

int64_t graft_tokenizer_vocab_size(const graft_tokenizer *tok) {
    if (!tok) return 0;
    return tok->hf ? tok->hf->n_ids : wordpiece_vocab_size(tok->wp);
}
