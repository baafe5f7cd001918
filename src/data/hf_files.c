/* hf_files.c: GPT-2 / RoBERTa byte-level BPE from vocab.json + merges.txt as an hf_tokenizer (the
 * BPE model and ByteLevel pre-tokenizer of hf_*.c); RoBERTa's "<s> A </s>" when the vocabulary
 * has <s> and </s>; both files as one JSON object in memory (the bundle). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/hf_load.h"

#define MAX_ID 0x7fffffff
#define MAX_BUNDLE_BYTES (1u << 30) /* 1 GiB */

/* vocab.json's object of token: id into the vocabulary. */
static graft_status read_vocab(loader *l, json_t *root) {
    graft_status st = GRAFT_OK;
    if (!json_is_object(root) || json_object_size(root) == 0)
        st = hf_bad(l, "vocab.json is not an object of token: id");
    const char *key;
    json_t *v;
    if (st == GRAFT_OK) json_object_foreach(root, key, v) {
            json_int_t id = json_integer_value(v);
            if (!json_is_integer(v) || id < 0 || id > MAX_ID) {
                st = hf_bad(l, "vocab.json: '%s' has no valid id", key);
                break;
            }
            if (str_map_put(&l->t->model.vocab, key, strlen(key), id)) {
                st = hf_oom(l);
                break;
            }
        }
    return st;
}

/* merges.txt: "#version" lines, then one merge "a b" a line (rank: its order). */
static graft_status read_merges(loader *l, const char *s, size_t size) {
    size_t rank = 0, line = 0;
    for (size_t at = 0; at < size;) {
        const char *nl = memchr(s + at, '\n', size - at);
        size_t end = nl ? (size_t)(nl - s) : size, len = end - at;
        const char *p = s + at;
        at = end + 1, line++;
        if (len && p[len - 1] == '\r') len--;
        if (len == 0 || (len >= 8 && !memcmp(p, "#version", 8))) continue;
        const char *sp = memchr(p, ' ', len);
        if (!sp || sp == p || sp + 1 == p + len || memchr(sp + 1, ' ', (size_t)(p + len - sp - 1)))
            return hf_bad(l, "merges.txt line %zu is not two tokens split by one space", line);
        char what[64];
        snprintf(what, sizeof what, "merges.txt line %zu", line);
        TRY(hf_add_merge(l, what, p, (size_t)(sp - p), sp + 1, (size_t)(p + len - sp - 1), rank));
        rank++;
    }
    return GRAFT_OK;
}

/* The specials transformers' GPT2Tokenizer / RobertaTokenizer declare, those the vocabulary has:
 * matched whole in the text (RoBERTa's <mask> with the spaces before it). */
static graft_status specials(loader *l) {
    static const char *const names[] = {"<s>", "</s>", "<pad>", "<unk>", "<mask>", "<|endoftext|>"};
    hf_tokenizer *t = l->t;
    if (!(t->added = calloc(6, sizeof *t->added))) return hf_oom(l);
    for (int k = 0; k < 6; k++) {
        size_t len = strlen(names[k]);
        int64_t id = str_map_get(&t->model.vocab, names[k], len);
        if (id < 0) continue;
        hf_added *a = &t->added[t->n_added++];
        a->id = id, a->len = len, a->special = true, a->lstrip = k == 4;
        if (!(a->content = hf_dup(names[k], len))) return hf_oom(l);
    }
    int64_t bos = hf_token_id(t, "<s>", 3), eos = hf_token_id(t, "</s>", 4);
    if (bos >= 0 && eos >= 0) { /* RobertaProcessing */
        hf_template *s = &t->single, *p = &t->pair;
        TRY(hf_add_piece(l, s, -1, 0, &bos, 1));
        TRY(hf_add_piece(l, s, 0, 0, NULL, 0));
        TRY(hf_add_piece(l, s, -1, 0, &eos, 1));
        TRY(hf_add_piece(l, p, -1, 0, &bos, 1));
        TRY(hf_add_piece(l, p, 0, 0, NULL, 0));
        TRY(hf_add_piece(l, p, -1, 0, &eos, 1));
        TRY(hf_add_piece(l, p, -1, 0, &eos, 1));
        TRY(hf_add_piece(l, p, 1, 0, NULL, 0));
        TRY(hf_add_piece(l, p, -1, 0, &eos, 1));
        t->roberta_types = true, t->cls = bos, t->sep = eos;
    }
    t->pad = hf_token_id(t, "<pad>", 5);
    t->unk = hf_token_id(t, "<unk>", 5);
    return GRAFT_OK;
}

static graft_status build(loader *l, json_t *vocab, const char *merges, size_t merges_size) {
    hf_tokenizer *t = l->t;
    t->model.kind = HF_BPE;
    t->model.unk = -1; /* byte-level: every byte has a token */
    TRY(read_vocab(l, vocab));
    TRY(read_merges(l, merges, merges_size));
    if (!(t->pretoks = calloc(1, sizeof *t->pretoks))) return hf_oom(l);
    t->n_pretoks = 1;
    t->pretoks[0].kind = HF_PRE_BYTE_LEVEL;
    t->pretoks[0].use_regex = true; /* GPT-2's split; no prefix space */
    TRY(hf_index_ids(l));
    return specials(l);
}

/* {"vocab.json": {...}, "merges.txt": "..."}: the two files as one JSON text (*out, malloc'd). */
static graft_status make_bundle(loader *l, json_t *vocab, const char *merges, size_t merges_size,
                                char **out) {
    json_t *root = json_object(), *m = json_stringn(merges, merges_size);
    graft_status st = GRAFT_OK;
    if (!m)
        st = hf_bad(l, "merges.txt is not UTF-8 text without NUL bytes");
    else if (!root || json_object_set(root, "vocab.json", vocab) ||
             json_object_set(root, "merges.txt", m) ||
             !(*out = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER)))
        st = hf_oom(l);
    json_decref(m);
    json_decref(root);
    return st;
}

/* The tokenizer from the parsed vocab.json and merges.txt; the bundle too when asked. */
static graft_status from_parts(hf_tokenizer **out, json_t *vocab, const char *merges,
                               size_t merges_size, const char *name, char **bundle, graft_err *e) {
    *out = NULL;
    hf_tokenizer *t;
    TRY(hf_tokenizer_new(&t, name, e));
    loader l = {t, e};
    graft_status st = build(&l, vocab, merges, merges_size);
    if (st == GRAFT_OK && bundle) st = make_bundle(&l, vocab, merges, merges_size, bundle);
    if (st != GRAFT_OK) {
        hf_tokenizer_free(t);
        return st;
    }
    *out = t;
    return GRAFT_OK;
}

graft_status hf_from_bpe_files(hf_tokenizer **out, const char *vocab_json, size_t vocab_size,
                               const char *merges, size_t merges_size, const char *name,
                               char **bundle, graft_err *e) {
    *out = NULL;
    if (bundle) *bundle = NULL;
    json_error_t jerr;
    json_t *vocab = json_loadb(vocab_json, vocab_size, 0, &jerr);
    if (!vocab)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "%s: vocab.json is not valid JSON (line %d, column %d: %s)", name, jerr.line,
                       jerr.column, jerr.text);
    graft_status st = from_parts(out, vocab, merges, merges_size, name, bundle, e);
    json_decref(vocab);
    return st;
}

graft_status hf_from_bpe_bundle(hf_tokenizer **out, const char *data, size_t size, const char *name,
                                graft_err *e) {
    *out = NULL;
    if (size > MAX_BUNDLE_BYTES)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "%s: vocab.json + merges.txt of %zu bytes, more than the %u bytes allowed",
                       name, size, MAX_BUNDLE_BYTES);
    json_error_t jerr;
    json_t *root = json_loadb(data, size, 0, &jerr);
    if (!root)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "%s: not valid JSON (line %d, column %d: %s)",
                       name, jerr.line, jerr.column, jerr.text);
    json_t *vocab = json_object_get(root, "vocab.json");
    json_t *merges = json_object_get(root, "merges.txt");
    graft_status st;
    if (!json_is_object(vocab) || !json_is_string(merges) || json_object_size(root) != 2)
        st = err_set(e, GRAFT_E_INVALID_ARGUMENT,
                     "%s: not the object {\"vocab.json\": {token: id, ...}, \"merges.txt\": "
                     "\"...\"} (vocab.json + merges.txt in one)",
                     name);
    else
        st = from_parts(out, vocab, json_string_value(merges), json_string_length(merges), name,
                        NULL, e);
    json_decref(root);
    return st;
}
