/* hf_spm.c: a SentencePiece .model (protobuf ModelProto, parsed by protobuf-c) as an hf_tokenizer:
 * the charsmap normalizer, Metaspace, and the Unigram or BPE model of hf_models.c, ids equal to
 * sentencepiece's SentencePieceProcessor.encode. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/hf_load.h"
#include "data/unicode.h"
#include "sentencepiece_model.pb-c.h"

#define MAX_PIECES 0x1000000       /* 16M pieces */
#define MAX_MODEL_BYTES (1u << 30) /* 1 GiB */
#define MAX_PIECE_BYTES 512        /* a piece longer than this is malformed */
typedef GraftSpm__ModelProto__SentencePiece spm_piece;

#define T_NORMAL GRAFT_SPM__MODEL_PROTO__SENTENCE_PIECE__TYPE__NORMAL
#define T_UNKNOWN GRAFT_SPM__MODEL_PROTO__SENTENCE_PIECE__TYPE__UNKNOWN
#define T_USER GRAFT_SPM__MODEL_PROTO__SENTENCE_PIECE__TYPE__USER_DEFINED
#define T_BYTE GRAFT_SPM__MODEL_PROTO__SENTENCE_PIECE__TYPE__BYTE

static bool matchable(GraftSpm__ModelProto__SentencePiece__Type
                          type) { /* pieces SentencePiece's lattice and merges use */
    return type == T_NORMAL || type == T_USER;
}

static graft_status read_pieces(loader *l, const GraftSpm__ModelProto *mp) {
    hf_model *m = &l->t->model;
    size_t n = mp->n_pieces;
    if (!(m->scores = malloc(n * sizeof *m->scores))) return hf_oom(l);
    m->min_score = INFINITY;
    m->unk = -1;
    for (size_t i = 0; i < n; i++) {
        const spm_piece *p = mp->pieces[i];
        const char *s = (const char *)p->piece.data;
        size_t len = p->piece.len, pos = 0;
        uint32_t cp;
        if (len == 0 || len > MAX_PIECE_BYTES || memchr(s, 0, len))
            return hf_bad(l, "piece %zu is empty, longer than %d bytes or holds a NUL byte", i,
                          MAX_PIECE_BYTES);
        while (pos < len)
            if (utf8_decode(s, len, &pos, &cp)) return hf_bad(l, "piece %zu is not UTF-8", i);
        if ((int)p->type < (int)T_NORMAL || (int)p->type > (int)T_BYTE)
            return hf_bad(l, "piece %zu has the unknown type %d", i, (int)p->type);
        if (str_map_get(&m->vocab, s, len) >= 0)
            return hf_bad(l, "piece %zu ('%.*s') is there twice", i, (int)len, s);
        if (str_map_put(&m->vocab, s, len, (int64_t)i)) return hf_oom(l);
        /* control, unknown, unused and byte pieces are never matched in text */
        m->scores[i] = matchable(p->type) ? (double)p->score : -INFINITY;
        if (p->type == T_NORMAL && m->scores[i] < m->min_score) m->min_score = m->scores[i];
        if (p->type == T_UNKNOWN) m->unk = (int64_t)i;
    }
    if (m->min_score == INFINITY) m->min_score = 0.0;
    if (m->unk < 0) return hf_bad(l, "no piece has the type UNKNOWN");
    return GRAFT_OK;
}

typedef struct ranked {
    double score;
    size_t id;
} ranked;

static int by_score(const void *a, const void *b) { /* higher score first, then lower id */
    const ranked *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* SentencePiece's BPE merges the adjacent pair whose union is the best-scored piece: every split
 * of a piece into two matchable pieces becomes a merge ranked by that piece's score. */
static graft_status bpe_merges(loader *l, const GraftSpm__ModelProto *mp) {
    hf_model *m = &l->t->model;
    size_t n = mp->n_pieces, k = 0;
    ranked *order = malloc(n * sizeof *order);
    if (!order) return hf_oom(l);
    for (size_t i = 0; i < n; i++)
        if (matchable(mp->pieces[i]->type)) order[k++] = (ranked){m->scores[i], i};
    qsort(order, k, sizeof *order, by_score);
    graft_status st = GRAFT_OK;
    for (size_t r = 0; r < k && st == GRAFT_OK; r++) {
        const spm_piece *p = mp->pieces[order[r].id];
        const char *s = (const char *)p->piece.data;
        size_t len = p->piece.len;
        for (size_t cut = 1; cut < len && st == GRAFT_OK; cut++) {
            if (((unsigned char)s[cut] & 0xC0) == 0x80) continue; /* inside a character */
            int64_t a = str_map_get(&m->vocab, s, cut),
                    b = str_map_get(&m->vocab, s + cut, len - cut);
            if (a < 0 || b < 0 || !matchable(mp->pieces[a]->type) ||
                !matchable(mp->pieces[b]->type))
                continue;
            st = hf_add_merge(l, "BPE", s, cut, s + cut, len - cut, r);
        }
    }
    free(order);
    return st;
}

static hf_normalizer *add_norm(loader *l, hf_norm_kind kind) {
    hf_tokenizer *t = l->t;
    hf_normalizer *nz = realloc(t->norms, (t->n_norms + 1) * sizeof *nz);
    if (!nz) return NULL;
    t->norms = nz;
    hf_normalizer *z = &t->norms[t->n_norms++];
    memset(z, 0, sizeof *z);
    z->kind = kind;
    return z;
}

/* precompiled charsmap; remove_extra_whitespaces: strip both ends, runs of spaces to one;
 * Metaspace with the dummy prefix. */
static graft_status pipeline(loader *l, const GraftSpm__NormalizerSpec *ns, bool split) {
    hf_tokenizer *t = l->t;
    hf_normalizer *z;
    if (ns->has_precompiled_charsmap && ns->precompiled_charsmap.len) {
        if (!(z = add_norm(l, HF_NORM_PRECOMPILED))) return hf_oom(l);
        TRY(hf_precompiled_set(l, z, ns->precompiled_charsmap.data, ns->precompiled_charsmap.len));
        z->longest = true;
    }
    if (ns->remove_extra_whitespaces) {
        if (!(z = add_norm(l, HF_NORM_STRIP))) return hf_oom(l);
        z->left = z->right = z->spaces_only = true;
        if (!(z = add_norm(l, HF_NORM_REPLACE))) return hf_oom(l);
        z->pattern.kind = HF_PAT_SPACES2;
        if (!(z->content = hf_dup(" ", 1))) return hf_oom(l);
        z->content_len = 1;
    }
    if (!(t->pretoks = calloc(1, sizeof *t->pretoks))) return hf_oom(l);
    t->n_pretoks = 1;
    hf_pretok *p = &t->pretoks[0];
    p->kind = HF_PRE_METASPACE;
    memcpy(p->replacement, "\xe2\x96\x81", 4); /* U+2581 */
    p->replacement_cp = 0x2581;
    p->prepend_scheme = ns->add_dummy_prefix ? HF_PREPEND_ALWAYS : HF_PREPEND_NEVER;
    p->split = split;
    return GRAFT_OK;
}

/* User-defined pieces are matched whole in the raw text, as SentencePiece does. */
static graft_status user_pieces(loader *l, const GraftSpm__ModelProto *mp) {
    hf_tokenizer *t = l->t;
    size_t n = 0;
    for (size_t i = 0; i < mp->n_pieces; i++) n += mp->pieces[i]->type == T_USER;
    if (n == 0) return GRAFT_OK;
    if (!(t->added = calloc(n, sizeof *t->added))) return hf_oom(l);
    for (size_t i = 0; i < mp->n_pieces; i++) {
        const spm_piece *p = mp->pieces[i];
        if (p->type != T_USER) continue;
        hf_added *a = &t->added[t->n_added++];
        a->id = (int64_t)i, a->len = p->piece.len;
        if (!(a->content = hf_dup((const char *)p->piece.data, p->piece.len))) return hf_oom(l);
    }
    return GRAFT_OK;
}

/* [CLS] A [SEP] (ALBERT, DeBERTa-v2) when both are pieces, else <s> A </s> (RoBERTa-like pairs
 * "<s> A </s></s> B </s>"), else A </s> (T5), else nothing; the pad is <pad> or [PAD]. */
static graft_status specials(loader *l) {
    hf_tokenizer *t = l->t;
    int64_t cls = hf_token_id(t, "[CLS]", 5), sep = hf_token_id(t, "[SEP]", 5);
    int64_t bos = hf_token_id(t, "<s>", 3), eos = hf_token_id(t, "</s>", 4);
    hf_template *s = &t->single, *p = &t->pair;
    if (cls >= 0 && sep >= 0) {
        TRY(hf_add_piece(l, s, -1, 0, &cls, 1));
        TRY(hf_add_piece(l, s, 0, 0, NULL, 0));
        TRY(hf_add_piece(l, s, -1, 0, &sep, 1));
        TRY(hf_add_piece(l, p, -1, 0, &cls, 1));
        TRY(hf_add_piece(l, p, 0, 0, NULL, 0));
        TRY(hf_add_piece(l, p, -1, 0, &sep, 1));
        TRY(hf_add_piece(l, p, 1, 1, NULL, 0));
        TRY(hf_add_piece(l, p, -1, 1, &sep, 1));
        t->cls = cls, t->sep = sep;
    } else if (eos >= 0) {
        if (bos >= 0) TRY(hf_add_piece(l, s, -1, 0, &bos, 1));
        TRY(hf_add_piece(l, s, 0, 0, NULL, 0));
        TRY(hf_add_piece(l, s, -1, 0, &eos, 1));
        if (bos >= 0) TRY(hf_add_piece(l, p, -1, 0, &bos, 1));
        TRY(hf_add_piece(l, p, 0, 0, NULL, 0));
        TRY(hf_add_piece(l, p, -1, 0, &eos, 1));
        if (bos >= 0) TRY(hf_add_piece(l, p, -1, 0, &eos, 1));
        TRY(hf_add_piece(l, p, 1, 0, NULL, 0));
        TRY(hf_add_piece(l, p, -1, 0, &eos, 1));
        t->cls = bos, t->sep = eos;
    }
    t->pad = hf_token_id(t, "<pad>", 5);
    if (t->pad < 0) t->pad = hf_token_id(t, "[PAD]", 5);
    t->unk = t->model.unk;
    return GRAFT_OK;
}

static graft_status build(loader *l, const GraftSpm__ModelProto *mp) {
    static const GraftSpm__TrainerSpec ts0 = GRAFT_SPM__TRAINER_SPEC__INIT;
    static const GraftSpm__NormalizerSpec ns0 = GRAFT_SPM__NORMALIZER_SPEC__INIT;
    const GraftSpm__TrainerSpec *ts = mp->trainer_spec ? mp->trainer_spec : &ts0;
    const GraftSpm__NormalizerSpec *ns = mp->normalizer_spec ? mp->normalizer_spec : &ns0;
    if (mp->n_pieces == 0 || mp->n_pieces > MAX_PIECES)
        return hf_bad(l, "%zu pieces (a SentencePiece model has 1 to %d)", mp->n_pieces,
                      MAX_PIECES);
    bool bpe = ts->model_type == GRAFT_SPM__TRAINER_SPEC__MODEL_TYPE__BPE;
    if (!bpe && ts->model_type != GRAFT_SPM__TRAINER_SPEC__MODEL_TYPE__UNIGRAM)
        return hf_bad(l, "model_type %d is not supported (graft reads UNIGRAM and BPE)",
                      (int)ts->model_type);
    if (ts->treat_whitespace_as_suffix || !ns->escape_whitespaces)
        return hf_bad(l, "treat_whitespace_as_suffix or escape_whitespaces=false is not supported");
    l->t->model.kind = bpe ? HF_BPE : HF_UNIGRAM;
    l->t->model.byte_fallback = ts->byte_fallback;
    l->t->model.fuse_unk = true; /* SentencePiece writes a run of unknown pieces as one */
    TRY(read_pieces(l, mp));
    if (bpe) TRY(bpe_merges(l, mp));
    TRY(pipeline(l, ns, ts->split_by_whitespace || bpe));
    TRY(hf_index_ids(l));
    TRY(user_pieces(l, mp));
    return specials(l);
}

graft_status hf_from_spm(hf_tokenizer **out, const unsigned char *data, size_t size,
                         const char *name, graft_err *e) {
    *out = NULL;
    hf_tokenizer *t;
    TRY(hf_tokenizer_new(&t, name, e));
    loader l = {t, e};
    GraftSpm__ModelProto *mp = NULL;
    graft_status st = GRAFT_OK;
    if (size == 0 || size > MAX_MODEL_BYTES)
        st = hf_bad(&l, "a SentencePiece model of %zu bytes (1 byte to 1 GiB)", size);
    else if (!(mp = graft_spm__model_proto__unpack(NULL, size, data)))
        st = hf_bad(&l, "not a SentencePiece model (the protobuf ModelProto does not parse: "
                        "truncated or another file)");
    if (st == GRAFT_OK) st = build(&l, mp);
    if (mp) graft_spm__model_proto__free_unpacked(mp, NULL);
    if (st != GRAFT_OK) {
        hf_tokenizer_free(t);
        return st;
    }
    *out = t;
    return GRAFT_OK;
}
