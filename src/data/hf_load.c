/* hf_load.c: reads a Hugging Face tokenizer.json (through jansson) into an hf_tokenizer; a
 * component graft does not implement is an error naming it, never an approximation. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/hf_tokenizer.h"
#include "data/hf_load.h"
#include "data/unicode.h"

static const char GPT2_REGEX[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

graft_status hf_bad(loader *l, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return err_set(l->e, GRAFT_E_INVALID_ARGUMENT, "%s: %s", l->t->name, msg);
}

graft_status hf_oom(loader *l) {
    return err_set(l->e, GRAFT_E_OUT_OF_MEMORY, "%s: out of memory", l->t->name);
}

graft_status hf_tokenizer_new(hf_tokenizer **out, const char *name, graft_err *e) {
    hf_tokenizer *t = calloc(1, sizeof *t);
    if (!t || !(t->name = strdup(name))) {
        free(t);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "%s: out of memory", name);
    }
    t->cls = t->sep = t->pad = t->unk = -1;
    *out = t;
    return GRAFT_OK;
}

bool hf_get_bool(const json_t *o, const char *key, bool dflt) {
    const json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

const char *hf_get_str(const json_t *o, const char *key, size_t *len) {
    const json_t *v = json_object_get(o, key);
    if (!json_is_string(v)) return NULL;
    if (len) *len = json_string_length(v);
    return json_string_value(v);
}

char *hf_dup(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n), d[n] = 0;
    return d;
}

/* A Replace / Split pattern: {"String": s} or {"Regex": r} with r one the matchers know. */
static graft_status parse_pattern(loader *l, const json_t *o, const char *what, hf_pattern *p) {
    const json_t *pat = json_object_get(o, "pattern");
    size_t len;
    const char *s = hf_get_str(pat, "String", &len);
    if (s) {
        p->kind = HF_PAT_LITERAL;
        return (p->text = hf_dup(s, len)) ? (p->len = len, GRAFT_OK) : hf_oom(l);
    }
    if (!(s = hf_get_str(pat, "Regex", &len))) return hf_bad(l, "%s has no pattern", what);
    if (!strcmp(s, " {2,}"))
        p->kind = HF_PAT_SPACES2;
    else if (!strcmp(s, GPT2_REGEX))
        p->kind = HF_PAT_GPT2;
    else if (!strcmp(s, "\\s+"))
        p->kind = HF_PAT_WHITESPACE;
    else if (!strcmp(s, "\\w+|[^\\w\\s]+"))
        p->kind = HF_PAT_WORDS;
    else if (!strpbrk(s, "\\^$.|?*+()[]{}")) {
        p->kind = HF_PAT_LITERAL;
        return (p->text = hf_dup(s, len)) ? (p->len = len, GRAFT_OK) : hf_oom(l);
    } else
        return hf_bad(l,
                      "%s: the regular expression '%s' is not supported (graft knows ' {2,}', "
                      "'\\s+', '\\w+|[^\\w\\s]+' and GPT-2's split pattern)",
                      what, s);
    return GRAFT_OK;
}

static size_t b64_decode(const char *s, size_t n, unsigned char *out) {
    size_t k = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int v = c >= 'A' && c <= 'Z'   ? c - 'A'
                : c >= 'a' && c <= 'z' ? c - 'a' + 26
                : c >= '0' && c <= '9' ? c - '0' + 52
                : c == '+'             ? 62
                : c == '/'             ? 63
                                       : -1;
        if (v < 0) {
            if (c == '=') break;
            return SIZE_MAX;
        }
        acc = acc << 6 | (uint32_t)v, bits += 6;
        if (bits >= 8) out[k++] = (unsigned char)(acc >> (bits -= 8));
    }
    return k;
}

graft_status hf_precompiled_set(loader *l, hf_normalizer *z, const unsigned char *raw, size_t n) {
    uint32_t trie_bytes = 0;
    if (n >= 4)
        trie_bytes = (uint32_t)raw[0] | (uint32_t)raw[1] << 8 | (uint32_t)raw[2] << 16 |
                     (uint32_t)raw[3] << 24;
    if (n < 4 || trie_bytes > n - 4 || trie_bytes % 4)
        return hf_bad(l, "the precompiled charsmap is not a SentencePiece precompiled map");
    z->kind = HF_NORM_PRECOMPILED;
    z->trie_n = trie_bytes / 4;
    z->trie = malloc((z->trie_n ? z->trie_n : 1) * sizeof *z->trie);
    z->normalized_n = n - 4 - trie_bytes;
    z->normalized = hf_dup((const char *)raw + 4 + trie_bytes, z->normalized_n);
    if (!z->trie || !z->normalized) return hf_oom(l);
    for (size_t i = 0; i < z->trie_n; i++) {
        const unsigned char *p = raw + 4 + 4 * i;
        z->trie[i] =
            (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    }
    return GRAFT_OK;
}

static graft_status parse_precompiled(loader *l, const json_t *o, hf_normalizer *z) {
    size_t len;
    const char *s = hf_get_str(o, "precompiled_charsmap", &len);
    if (!s) return hf_bad(l, "normalizer 'Precompiled' has no precompiled_charsmap");
    unsigned char *raw = malloc(len / 4 * 3 + 4);
    if (!raw) return hf_oom(l);
    size_t n = b64_decode(s, len, raw);
    graft_status st = n == SIZE_MAX ? hf_bad(l, "normalizer 'Precompiled': the charsmap is not "
                                                "base64")
                                    : hf_precompiled_set(l, z, raw, n);
    free(raw);
    return st;
}

static graft_status add_normalizer(loader *l, const json_t *o, int depth);

static graft_status normalizer_fields(loader *l, const json_t *o, const char *type,
                                      hf_normalizer *z) {
    static const char *const simple[] = {"Lowercase", "NFC",          "NFD",      "NFKC",
                                         "NFKD",      "StripAccents", "ByteLevel"};
    static const hf_norm_kind kinds[] = {HF_NORM_LOWERCASE, HF_NORM_NFC,  HF_NORM_NFD,
                                         HF_NORM_NFKC,      HF_NORM_NFKD, HF_NORM_STRIP_ACCENTS,
                                         HF_NORM_BYTE_LEVEL};
    for (size_t k = 0; k < sizeof simple / sizeof *simple; k++)
        if (!strcmp(type, simple[k])) return z->kind = kinds[k], GRAFT_OK;
    if (!strcmp(type, "BertNormalizer")) {
        z->kind = HF_NORM_BERT;
        z->clean_text = hf_get_bool(o, "clean_text", true);
        z->chinese = hf_get_bool(o, "handle_chinese_chars", true);
        z->lowercase = hf_get_bool(o, "lowercase", true);
        z->strip_accents = hf_get_bool(o, "strip_accents", z->lowercase);
        return GRAFT_OK;
    }
    if (!strcmp(type, "Strip")) {
        z->kind = HF_NORM_STRIP;
        z->left = hf_get_bool(o, "strip_left", true),
        z->right = hf_get_bool(o, "strip_right", true);
        return GRAFT_OK;
    }
    if (!strcmp(type, "Replace") || !strcmp(type, "Prepend")) {
        bool rep = type[0] == 'R';
        z->kind = rep ? HF_NORM_REPLACE : HF_NORM_PREPEND;
        size_t len;
        const char *c = hf_get_str(o, rep ? "content" : "prepend", &len);
        if (!c)
            return hf_bad(l, "normalizer '%s' has no %s string", type, rep ? "content" : "prepend");
        if (!(z->content = hf_dup(c, len))) return hf_oom(l);
        z->content_len = len;
        return rep ? parse_pattern(l, o, "normalizer 'Replace'", &z->pattern) : GRAFT_OK;
    }
    if (!strcmp(type, "Precompiled")) {
        z->kind = HF_NORM_PRECOMPILED;
        return parse_precompiled(l, o, z);
    }
    return hf_bad(l, "normalizer '%s' is not supported", type);
}

static graft_status add_normalizer(loader *l, const json_t *o, int depth) {
    hf_tokenizer *t = l->t;
    const char *type = hf_get_str(o, "type", NULL);
    if (!type) return hf_bad(l, "a normalizer without a type");
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(o, "normalizers");
        if (!json_is_array(list) || depth > 8) return hf_bad(l, "normalizer 'Sequence' malformed");
        for (size_t i = 0; i < json_array_size(list); i++)
            TRY(add_normalizer(l, json_array_get(list, i), depth + 1));
        return GRAFT_OK;
    }
    hf_normalizer *nz = realloc(t->norms, (t->n_norms + 1) * sizeof *nz);
    if (!nz) return hf_oom(l);
    t->norms = nz;
    hf_normalizer *z = &t->norms[t->n_norms++];
    memset(z, 0, sizeof *z);
    return normalizer_fields(l, o, type, z);
}

static graft_status parse_behavior(loader *l, const json_t *o, const char *what,
                                   hf_split_behavior *b) {
    static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious",
                                        "MergedWithNext", "Contiguous"};
    const char *s = hf_get_str(o, "behavior", NULL);
    if (!s) return GRAFT_OK; /* the default was set by the caller */
    for (int k = 0; k < 5; k++)
        if (!strcmp(s, names[k])) return *b = (hf_split_behavior)k, GRAFT_OK;
    return hf_bad(l, "%s: behavior '%s' is not known", what, s);
}

static graft_status metaspace_fields(loader *l, const json_t *o, hf_pretok *p) {
    size_t len;
    const char *r = hf_get_str(o, "replacement", &len);
    if (!r) r = "\xe2\x96\x81", len = 3; /* U+2581 */
    size_t pos = 0;
    if (len == 0 || len >= sizeof p->replacement || utf8_decode(r, len, &pos, &p->replacement_cp) ||
        pos != len)
        return hf_bad(l, "pre-tokenizer 'Metaspace': the replacement must be one character");
    memcpy(p->replacement, r, len);
    const char *scheme = hf_get_str(o, "prepend_scheme", NULL);
    if (scheme) {
        if (!strcmp(scheme, "always"))
            p->prepend_scheme = HF_PREPEND_ALWAYS;
        else if (!strcmp(scheme, "first"))
            p->prepend_scheme = HF_PREPEND_FIRST;
        else if (!strcmp(scheme, "never"))
            p->prepend_scheme = HF_PREPEND_NEVER;
        else
            return hf_bad(l, "pre-tokenizer 'Metaspace': prepend_scheme '%s' is not known", scheme);
    } else { /* files older than prepend_scheme: add_prefix_space */
        p->prepend_scheme =
            hf_get_bool(o, "add_prefix_space", true) ? HF_PREPEND_ALWAYS : HF_PREPEND_NEVER;
    }
    p->split = hf_get_bool(o, "split", true);
    return GRAFT_OK;
}

static graft_status add_pretok(loader *l, const json_t *o, int depth) {
    hf_tokenizer *t = l->t;
    const char *type = hf_get_str(o, "type", NULL);
    if (!type) return hf_bad(l, "a pre-tokenizer without a type");
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(o, "pretokenizers");
        if (!json_is_array(list) || depth > 8)
            return hf_bad(l, "pre-tokenizer 'Sequence' malformed");
        for (size_t i = 0; i < json_array_size(list); i++)
            TRY(add_pretok(l, json_array_get(list, i), depth + 1));
        return GRAFT_OK;
    }
    hf_pretok *np = realloc(t->pretoks, (t->n_pretoks + 1) * sizeof *np);
    if (!np) return hf_oom(l);
    t->pretoks = np;
    hf_pretok *p = &t->pretoks[t->n_pretoks++];
    memset(p, 0, sizeof *p);
    p->behavior = HF_SPLIT_ISOLATED;
    if (!strcmp(type, "BertPreTokenizer"))
        p->kind = HF_PRE_BERT;
    else if (!strcmp(type, "Whitespace"))
        p->kind = HF_PRE_WHITESPACE;
    else if (!strcmp(type, "WhitespaceSplit"))
        p->kind = HF_PRE_WHITESPACE_SPLIT;
    else if (!strcmp(type, "ByteLevel")) {
        p->kind = HF_PRE_BYTE_LEVEL;
        p->add_prefix_space = hf_get_bool(o, "add_prefix_space", true);
        p->use_regex = hf_get_bool(o, "use_regex", true);
    } else if (!strcmp(type, "Metaspace")) {
        p->kind = HF_PRE_METASPACE;
        return metaspace_fields(l, o, p);
    } else if (!strcmp(type, "Split")) {
        p->kind = HF_PRE_SPLIT;
        p->invert = hf_get_bool(o, "invert", false);
        TRY(parse_pattern(l, o, "pre-tokenizer 'Split'", &p->pattern));
        return parse_behavior(l, o, "pre-tokenizer 'Split'", &p->behavior);
    } else if (!strcmp(type, "Punctuation")) {
        p->kind = HF_PRE_PUNCTUATION;
        return parse_behavior(l, o, "pre-tokenizer 'Punctuation'", &p->behavior);
    } else if (!strcmp(type, "Digits")) {
        p->kind = HF_PRE_DIGITS;
        p->individual_digits = hf_get_bool(o, "individual_digits", false);
    } else
        return hf_bad(l, "pre-tokenizer '%s' is not supported", type);
    return GRAFT_OK;
}

void hf_tokenizer_free(hf_tokenizer *t) {
    if (!t) return;
    for (size_t k = 0; k < t->n_norms; k++) {
        free(t->norms[k].pattern.text), free(t->norms[k].content);
        free(t->norms[k].trie), free(t->norms[k].normalized);
    }
    free(t->norms);
    for (size_t k = 0; k < t->n_pretoks; k++) free(t->pretoks[k].pattern.text);
    free(t->pretoks);
    str_map_free(&t->model.vocab);
    pair_map_free(&t->model.merges);
    free(t->model.prefix), free(t->model.suffix), free(t->model.scores);
    for (size_t k = 0; k < t->n_added; k++) free(t->added[k].content);
    free(t->added);
    hf_template *tps[2] = {&t->single, &t->pair};
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < tps[k]->n; i++) free(tps[k]->pieces[i].ids);
        free(tps[k]->pieces);
    }
    for (int64_t i = 0; t->id_tokens && i < t->n_ids; i++) free(t->id_tokens[i]);
    free(t->id_tokens);
    free(t->name);
    free(t);
}

graft_status hf_tokenizer_load(hf_tokenizer **out, const char *json, size_t size, const char *name,
                               graft_err *e) {
    *out = NULL;
    hf_tokenizer *t = calloc(1, sizeof *t);
    if (!t || !(t->name = strdup(name))) {
        free(t);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "%s: out of memory", name);
    }
    loader l = {t, e};
    json_error_t jerr;
    json_t *root = json_loadb(json, size, 0, &jerr);
    graft_status st = GRAFT_OK;
    if (!root)
        st = hf_bad(&l, "not valid JSON (line %d, column %d: %s)", jerr.line, jerr.column,
                    jerr.text);
    else if (!json_is_object(root))
        st = hf_bad(&l, "not a tokenizer.json (the top level is not an object)");
    const json_t *v;
    if (st == GRAFT_OK) st = hf_load_model(&l, json_object_get(root, "model"));
    if (st == GRAFT_OK && json_is_object(v = json_object_get(root, "normalizer")))
        st = add_normalizer(&l, v, 0);
    if (st == GRAFT_OK && json_is_object(v = json_object_get(root, "pre_tokenizer")))
        st = add_pretok(&l, v, 0);
    if (st == GRAFT_OK) st = hf_load_post(&l, root);
    json_decref(root);
    if (st != GRAFT_OK) {
        hf_tokenizer_free(t);
        return st;
    }
    *out = t;
    return GRAFT_OK;
}
