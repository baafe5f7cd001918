/* hf_load_model.c: tokenizer.json's model (WordPiece, BPE, Unigram, WordLevel), added tokens,
 * post-processor (Bert, Roberta, Template, ByteLevel, Sequence), padding and the special tokens'
 * roles (CLS/BOS, SEP/EOS, PAD, UNK). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/hf_load.h"

#define MAX_ID 0x7fffffff

static graft_status read_vocab_object(loader *l, const json_t *vocab, const char *model) {
    if (!json_is_object(vocab)) return hf_bad(l, "model '%s' has no vocab object", model);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)vocab, key, v) {
        json_int_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0 || id > MAX_ID)
            return hf_bad(l, "model '%s': vocab entry '%s' has no valid id", model, key);
        /* jansson keys are NUL-terminated; tokens with NUL bytes are refused at parse time */
        if (str_map_put(&l->t->model.vocab, key, strlen(key), id)) return hf_oom(l);
    }
    return GRAFT_OK;
}

static graft_status unk_from_token(loader *l, const json_t *o, const char *dflt) {
    hf_model *m = &l->t->model;
    size_t len;
    const char *unk = hf_get_str(o, "unk_token", &len);
    if (!unk && dflt) unk = dflt, len = strlen(dflt);
    m->unk = unk ? str_map_get(&m->vocab, unk, len) : -1;
    if (unk && m->unk < 0 && m->kind == HF_BPE)
        return hf_bad(l, "model 'BPE': unk_token '%s' is not in the vocabulary", unk);
    return GRAFT_OK;
}

static graft_status opt_string(loader *l, const json_t *o, const char *key, const char *dflt,
                               char **out, size_t *len) {
    const char *s = hf_get_str(o, key, len);
    if (!s && dflt && !json_is_null(json_object_get(o, key))) s = dflt, *len = strlen(dflt);
    if (!s) return GRAFT_OK;
    return (*out = hf_dup(s, *len)) ? GRAFT_OK : hf_oom(l);
}

/* One merge: "a b" (older files) or ["a", "b"]. */
static graft_status merge_parts(loader *l, const json_t *v, size_t rank, const char **a, size_t *na,
                                const char **b, size_t *nb, char *buf, size_t cap) {
    if (json_is_array(v) && json_array_size(v) == 2 && json_is_string(json_array_get(v, 0)) &&
        json_is_string(json_array_get(v, 1))) {
        *a = json_string_value(json_array_get(v, 0)),
        *na = json_string_length(json_array_get(v, 0));
        *b = json_string_value(json_array_get(v, 1)),
        *nb = json_string_length(json_array_get(v, 1));
        return GRAFT_OK;
    }
    const char *s = json_string_value(v), *sp = s ? strchr(s, ' ') : NULL;
    if (!sp || strchr(sp + 1, ' ') || json_string_length(v) >= cap)
        return hf_bad(l, "model 'BPE': merge %zu is not two tokens", rank);
    memcpy(buf, s, json_string_length(v) + 1);
    buf[sp - s] = 0;
    *a = buf, *na = (size_t)(sp - s), *b = buf + (sp - s) + 1, *nb = strlen(*b);
    return GRAFT_OK;
}

graft_status hf_add_merge(loader *l, const char *what, const char *a, size_t na, const char *b,
                          size_t nb, size_t r) {
    hf_model *m = &l->t->model;
    char joined[1024];
    int64_t ia = str_map_get(&m->vocab, a, na), ib = str_map_get(&m->vocab, b, nb);
    if (ia < 0 || ib < 0)
        return hf_bad(l, "%s: merge %zu names '%.*s', which is not in the vocabulary", what, r,
                      (int)(ia < 0 ? na : nb), ia < 0 ? a : b);
    if (nb < m->prefix_len || na + nb >= sizeof joined || r > UINT32_MAX - 1)
        return hf_bad(l, "%s: merge %zu ('%.*s' '%.*s') is malformed", what, r, (int)na, a, (int)nb,
                      b);
    memcpy(joined, a, na); /* the right part's continuing prefix dropped */
    memcpy(joined + na, b + m->prefix_len, nb - m->prefix_len);
    int64_t id = str_map_get(&m->vocab, joined, na + nb - m->prefix_len);
    if (id < 0)
        return hf_bad(l, "%s: merge %zu makes '%.*s', which is not in the vocabulary", what, r,
                      (int)(na + nb - m->prefix_len), joined);
    if (pair_map_put(&m->merges, (uint32_t)ia, (uint32_t)ib, (uint32_t)r, (uint32_t)id))
        return hf_oom(l);
    return GRAFT_OK;
}

static graft_status read_merges(loader *l, const json_t *merges) {
    if (!json_is_array(merges)) return hf_bad(l, "model 'BPE' has no merges list");
    char buf[1024];
    for (size_t r = 0; r < json_array_size(merges); r++) {
        const char *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        TRY(merge_parts(l, json_array_get(merges, r), r, &a, &na, &b, &nb, buf, sizeof buf));
        TRY(hf_add_merge(l, "model 'BPE'", a, na, b, nb, r));
    }
    return GRAFT_OK;
}

static graft_status read_unigram(loader *l, const json_t *o) {
    hf_model *m = &l->t->model;
    const json_t *vocab = json_object_get(o, "vocab");
    if (!json_is_array(vocab) || json_array_size(vocab) == 0 || json_array_size(vocab) > MAX_ID)
        return hf_bad(l, "model 'Unigram' has no vocab list");
    size_t n = json_array_size(vocab);
    if (!(m->scores = malloc(n * sizeof *m->scores))) return hf_oom(l);
    m->min_score = INFINITY;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(vocab, i), *p = json_array_get(e, 0),
                     *s = json_array_get(e, 1);
        if (!json_is_string(p) || !json_is_number(s))
            return hf_bad(l, "model 'Unigram': vocab entry %zu is not [piece, score]", i);
        if (str_map_put(&m->vocab, json_string_value(p), json_string_length(p), (int64_t)i))
            return hf_oom(l);
        m->scores[i] = json_number_value(s);
        if (m->scores[i] < m->min_score) m->min_score = m->scores[i];
    }
    const json_t *unk = json_object_get(o, "unk_id");
    m->unk = json_is_integer(unk) ? json_integer_value(unk) : -1;
    if (m->unk >= (int64_t)n)
        return hf_bad(l, "model 'Unigram': unk_id %lld is past the vocabulary", (long long)m->unk);
    m->byte_fallback = hf_get_bool(o, "byte_fallback", false);
    return GRAFT_OK;
}

/* The text of every id (for graft_tokenizer_token and the metadata). */
graft_status hf_index_ids(loader *l) {
    hf_tokenizer *t = l->t;
    const str_map *v = &t->model.vocab;
    int64_t n = 0;
    for (size_t k = 0; k < v->n; k++)
        if (v->vals[k] + 1 > n) n = v->vals[k] + 1;
    if ((size_t)n > 2 * v->n + 65536) /* checked before the table is allocated */
        return hf_bad(l, "the vocabulary's ids run to %lld for %zu tokens", (long long)n - 1, v->n);
    if (!(t->id_tokens = calloc((size_t)(n ? n : 1), sizeof *t->id_tokens))) return hf_oom(l);
    t->n_ids = n;
    for (size_t k = 0; k < v->n; k++) {
        int64_t id = v->vals[k];
        if (str_map_get(v, v->pool + v->offs[k], v->lens[k]) != id || t->id_tokens[id]) continue;
        if (!(t->id_tokens[id] = hf_dup(v->pool + v->offs[k], v->lens[k]))) return hf_oom(l);
    }
    return GRAFT_OK;
}

graft_status hf_load_model(loader *l, const json_t *o) {
    hf_model *m = &l->t->model;
    const char *type = hf_get_str(o, "type", NULL);
    if (!json_is_object(o)) return hf_bad(l, "no model object");
    if (!type) return hf_bad(l, "the model has no type");
    if (!strcmp(type, "WordPiece")) {
        m->kind = HF_WORDPIECE;
        TRY(read_vocab_object(l, json_object_get(o, "vocab"), type));
        TRY(unk_from_token(l, o, "[UNK]"));
        TRY(opt_string(l, o, "continuing_subword_prefix", "##", &m->prefix, &m->prefix_len));
        const json_t *mc = json_object_get(o, "max_input_chars_per_word");
        m->max_chars = json_is_integer(mc) ? (int)json_integer_value(mc) : 100;
    } else if (!strcmp(type, "WordLevel")) {
        m->kind = HF_WORDLEVEL;
        TRY(read_vocab_object(l, json_object_get(o, "vocab"), type));
        TRY(unk_from_token(l, o, NULL));
    } else if (!strcmp(type, "BPE")) {
        m->kind = HF_BPE;
        const json_t *dropout = json_object_get(o, "dropout");
        if (json_is_number(dropout) && json_number_value(dropout) > 0)
            return hf_bad(l, "model 'BPE' with dropout %g is not supported (it is random)",
                          json_number_value(dropout));
        TRY(read_vocab_object(l, json_object_get(o, "vocab"), type));
        TRY(unk_from_token(l, o, NULL));
        TRY(opt_string(l, o, "continuing_subword_prefix", NULL, &m->prefix, &m->prefix_len));
        TRY(opt_string(l, o, "end_of_word_suffix", NULL, &m->suffix, &m->suffix_len));
        m->fuse_unk = hf_get_bool(o, "fuse_unk", false);
        m->byte_fallback = hf_get_bool(o, "byte_fallback", false);
        m->ignore_merges = hf_get_bool(o, "ignore_merges", false);
        TRY(read_merges(l, json_object_get(o, "merges")));
    } else if (!strcmp(type, "Unigram")) {
        m->kind = HF_UNIGRAM;
        TRY(read_unigram(l, o));
    } else {
        return hf_bad(l, "model '%s' is not supported", type);
    }
    return hf_index_ids(l);
}

static graft_status read_added(loader *l, const json_t *list) {
    hf_tokenizer *t = l->t;
    size_t n = json_array_size(list);
    if (n == 0) return GRAFT_OK;
    if (!(t->added = calloc(n, sizeof *t->added))) return hf_oom(l);
    for (size_t i = 0; i < n; i++) {
        const json_t *o = json_array_get(list, i), *idv = json_object_get(o, "id");
        size_t len;
        const char *content = hf_get_str(o, "content", &len);
        if (!content || !json_is_integer(idv) || json_integer_value(idv) < 0 ||
            json_integer_value(idv) > MAX_ID)
            return hf_bad(l, "added token %zu has no content or id", i);
        hf_added *a = &t->added[t->n_added++];
        int64_t in_vocab = str_map_get(&t->model.vocab, content, len);
        a->id = in_vocab >= 0 ? in_vocab : json_integer_value(idv);
        a->special = hf_get_bool(o, "special", false);
        a->single_word = hf_get_bool(o, "single_word", false);
        a->lstrip = hf_get_bool(o, "lstrip", false), a->rstrip = hf_get_bool(o, "rstrip", false);
        a->normalized = hf_get_bool(o, "normalized", !a->special);
        if (a->id >= t->n_ids + 65536)
            return hf_bad(l, "added token '%s' has id %lld, far past the vocabulary's %lld",
                          content, (long long)a->id, (long long)t->n_ids);
        if (a->id >= t->n_ids) { /* ids past the model's vocabulary */
            char **more = realloc(t->id_tokens, (size_t)(a->id + 1) * sizeof *more);
            if (!more) return hf_oom(l);
            memset(more + t->n_ids, 0, (size_t)(a->id + 1 - t->n_ids) * sizeof *more);
            t->id_tokens = more, t->n_ids = a->id + 1;
        }
        if (!t->id_tokens[a->id] && !(t->id_tokens[a->id] = hf_dup(content, len))) return hf_oom(l);
        if (a->normalized) { /* matched in normalized text: its normalized form */
            hf_buf norm = {0};
            TRY(hf_normalize(t, content, len, &norm, l->e));
            a->content = norm.s ? norm.s : hf_dup("", 0), a->len = norm.n;
        } else {
            a->content = hf_dup(content, len), a->len = len;
        }
        if (!a->content) return hf_oom(l);
    }
    return GRAFT_OK;
}

static graft_status piece_ids(loader *l, hf_piece *p, const int64_t *ids, size_t n) {
    if (!(p->ids = malloc((n ? n : 1) * sizeof *p->ids))) return hf_oom(l);
    memcpy(p->ids, ids, n * sizeof *ids);
    p->n_ids = n, p->seq = -1;
    return GRAFT_OK;
}

graft_status hf_add_piece(loader *l, hf_template *tp, int seq, int type_id, const int64_t *ids,
                          size_t n) {
    hf_piece *np = realloc(tp->pieces, (tp->n + 1) * sizeof *np);
    if (!np) return hf_oom(l);
    tp->pieces = np;
    hf_piece *p = &tp->pieces[tp->n++];
    memset(p, 0, sizeof *p);
    p->type_id = type_id, p->seq = seq;
    return seq < 0 ? piece_ids(l, p, ids, n) : GRAFT_OK;
}

/* ["<s>", 0] of BertProcessing / RobertaProcessing. */
static graft_status token_pair(loader *l, const json_t *o, const char *key, int64_t *id) {
    const json_t *v = json_array_get(json_object_get(o, key), 1);
    if (!json_is_integer(v)) return hf_bad(l, "post-processor: '%s' is not [token, id]", key);
    *id = json_integer_value(v);
    return GRAFT_OK;
}

static graft_status template_list(loader *l, const json_t *list, const json_t *specials,
                                  hf_template *tp, const char *which) {
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *e = json_array_get(list, i), *sp = json_object_get(e, "SpecialToken"),
                     *sq = json_object_get(e, "Sequence"), *o = sp ? sp : sq;
        const char *id = hf_get_str(o, "id", NULL);
        int type_id = (int)json_integer_value(json_object_get(o, "type_id"));
        if (!id) return hf_bad(l, "TemplateProcessing: %s piece %zu is malformed", which, i);
        if (sq) {
            TRY(hf_add_piece(l, tp, strcmp(id, "A") ? 1 : 0, type_id, NULL, 0));
            continue;
        }
        const json_t *ids = json_object_get(json_object_get(specials, id), "ids");
        int64_t v[16];
        size_t n = json_array_size(ids);
        if (!json_is_array(ids) || n > 16)
            return hf_bad(l, "TemplateProcessing: special token '%s' has no ids", id);
        for (size_t k = 0; k < n; k++) v[k] = json_integer_value(json_array_get(ids, k));
        TRY(hf_add_piece(l, tp, -1, type_id, v, n));
    }
    return GRAFT_OK;
}

static graft_status read_post(loader *l, const json_t *o, int depth) {
    hf_tokenizer *t = l->t;
    const char *type = hf_get_str(o, "type", NULL);
    if (!type) return hf_bad(l, "a post-processor without a type");
    if (!strcmp(type, "ByteLevel")) return GRAFT_OK; /* offsets only */
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(o, "processors");
        if (!json_is_array(list) || depth > 8)
            return hf_bad(l, "post-processor 'Sequence' malformed");
        for (size_t i = 0; i < json_array_size(list); i++)
            TRY(read_post(l, json_array_get(list, i), depth + 1));
        return GRAFT_OK;
    }
    if (t->single.n || t->pair.n)
        return hf_bad(l, "post-processor: more than one adds special tokens");
    if (!strcmp(type, "BertProcessing") || !strcmp(type, "RobertaProcessing")) {
        int64_t cls = -1, sep = -1;
        TRY(token_pair(l, o, "cls", &cls));
        TRY(token_pair(l, o, "sep", &sep));
        bool roberta = type[0] == 'R';
        t->roberta_types = roberta;
        TRY(hf_add_piece(l, &t->single, -1, 0, &cls, 1));
        TRY(hf_add_piece(l, &t->single, 0, 0, NULL, 0));
        TRY(hf_add_piece(l, &t->single, -1, 0, &sep, 1));
        TRY(hf_add_piece(l, &t->pair, -1, 0, &cls, 1));
        TRY(hf_add_piece(l, &t->pair, 0, 0, NULL, 0));
        TRY(hf_add_piece(l, &t->pair, -1, 0, &sep, 1));
        if (roberta) TRY(hf_add_piece(l, &t->pair, -1, 0, &sep, 1));
        TRY(hf_add_piece(l, &t->pair, 1, 1, NULL, 0));
        return hf_add_piece(l, &t->pair, -1, 1, &sep, 1);
    }
    if (!strcmp(type, "TemplateProcessing")) {
        const json_t *specials = json_object_get(o, "special_tokens");
        TRY(template_list(l, json_object_get(o, "single"), specials, &t->single, "single"));
        return template_list(l, json_object_get(o, "pair"), specials, &t->pair, "pair");
    }
    return hf_bad(l, "post-processor '%s' is not supported", type);
}

/* CLS/BOS and SEP/EOS: the special tokens before and after $A in the single template; PAD: the
 * padding's pad_id, else [PAD], <pad>, <PAD>; UNK: the model's. */
static void find_roles(hf_tokenizer *t, const json_t *root) {
    t->cls = t->sep = -1;
    bool seen_a = false;
    for (size_t i = 0; i < t->single.n; i++) {
        const hf_piece *p = &t->single.pieces[i];
        if (p->seq >= 0)
            seen_a = true;
        else if (p->n_ids && !seen_a && t->cls < 0)
            t->cls = p->ids[0];
        else if (p->n_ids && seen_a && t->sep < 0)
            t->sep = p->ids[0];
    }
    const json_t *pad = json_object_get(json_object_get(root, "padding"), "pad_id");
    t->pad = json_is_integer(pad) ? json_integer_value(pad) : -1;
    static const char *const pads[] = {"[PAD]", "<pad>", "<PAD>"};
    for (int k = 0; k < 3 && t->pad < 0; k++) t->pad = hf_token_id(t, pads[k], strlen(pads[k]));
    t->unk = t->model.unk; /* else the usual names (byte-level BPE has no unknown token) */
    static const char *const unks[] = {"[UNK]", "<unk>", "<UNK>"};
    for (int k = 0; k < 3 && t->unk < 0; k++) t->unk = hf_token_id(t, unks[k], strlen(unks[k]));
}

graft_status hf_load_post(loader *l, const json_t *root) {
    const json_t *added = json_object_get(root, "added_tokens"), *post;
    if (added && !json_is_array(added)) return hf_bad(l, "added_tokens is not a list");
    TRY(read_added(l, added));
    if (json_is_object(post = json_object_get(root, "post_processor"))) TRY(read_post(l, post, 0));
    find_roles(l->t, root);
    return GRAFT_OK;
}
