/* text_model.c: a text classifier's tokenizer settings in its metadata (graft.text.*): written at
 * export, read by predict and eval. */
#include "text_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"

#define MAX_TOKENIZER_BYTES (1u << 30) /* a carried SentencePiece model, decoded: 1 GiB */

static const char *const ROLE_NAMES[TEXT_ROLES] = {"ids", "mask", "type_ids"};

int text_model_detect(const graft_model *m) {
    int n = graft_model_input_count(m);
    for (int i = 0; i < n; i++) {
        graft_value_info v;
        if (graft_model_input_info(m, i, &v) != GRAFT_OK ||
            (v.dtype != GRAFT_DTYPE_I64 && v.dtype != GRAFT_DTYPE_I32))
            return 0;
    }
    return n > 0;
}

static int model_has_input(const graft_model *m, const char *name, size_t len) {
    for (int i = 0; i < graft_model_input_count(m); i++) {
        graft_value_info v;
        if (graft_model_input_info(m, i, &v) == GRAFT_OK && strlen(v.name) == len &&
            strncmp(v.name, name, len) == 0)
            return i;
    }
    return -1;
}

/* Roles from "graft.text.inputs" ("ids=NAME,mask=NAME,type_ids=NAME"). */
static int roles_from_metadata(const char *cmd, const graft_model *m, const char *v,
                               text_model *tm) {
    for (const char *p = v; *p;) {
        const char *eq = strchr(p, '='), *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        int role = -1;
        for (int r = 0; eq && eq < end && r < TEXT_ROLES; r++)
            if ((size_t)(eq - p) == strlen(ROLE_NAMES[r]) && !strncmp(p, ROLE_NAMES[r], eq - p))
                role = r;
        int at = role >= 0 ? model_has_input(m, eq + 1, (size_t)(end - eq - 1)) : -1;
        if (at < 0)
            return cli_error(cmd,
                             "metadata graft.text.inputs = '%s' does not name the model's "
                             "inputs as ids=NAME,mask=NAME,type_ids=NAME",
                             v),
                   1;
        graft_value_info info;
        graft_model_input_info(m, at, &info);
        tm->input[role] = info.name;
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* Which input takes the ids, the mask and the type ids: the metadata, else what the graph does
 * with each (graft_model_text_inputs). */
static int assign_roles(const char *cmd, graft_ctx *ctx, const graft_model *m, text_model *tm) {
    const char *v = cli_metadata(m, "graft.text.inputs");
    if (v) {
        if (roles_from_metadata(cmd, m, v, tm)) return 1;
        for (int i = 0; i < graft_model_input_count(m); i++) {
            graft_value_info info;
            graft_model_input_info(m, i, &info);
            int known = 0;
            for (int r = 0; r < TEXT_ROLES; r++)
                known |= tm->input[r] && !strcmp(tm->input[r], info.name);
            if (!known)
                return cli_error(cmd, "metadata graft.text.inputs = '%s' gives input '%s' no role",
                                 v, info.name),
                       1;
        }
    } else if (graft_model_text_inputs(m, tm->input) != GRAFT_OK) {
        return cli_error(cmd, "%s", graft_last_error(ctx)), 1;
    }
    if (!tm->input[TEXT_IDS]) return cli_error(cmd, "the model has no input for the token ids"), 1;
    return 0;
}

/* A --vocab must give the special tokens the ids the model was trained with: the metadata's
 * graft.text.special_ids is "TOKEN=ID,TOKEN=ID,..." ("[CLS]=101,..." or "<s>=0,..."). */
static int check_special_ids(const char *cmd, const graft_model *m, const text_model *tm,
                             const char *vocab) {
    const char *v = cli_metadata(m, "graft.text.special_ids");
    for (const char *p = v; p && *p;) {
        const char *end = strchr(p, ','), *eq = NULL;
        if (!end) end = p + strlen(p);
        for (const char *q = p; q < end; q++)
            if (*q == '=') eq = q;
        char token[256];
        if (eq && eq > p && (size_t)(eq - p) < sizeof token) {
            memcpy(token, p, (size_t)(eq - p));
            token[eq - p] = 0;
            long want = strtol(eq + 1, NULL, 10);
            int64_t got = graft_tokenizer_token_id(tm->tok, token);
            if (got != want)
                return cli_error(cmd,
                                 "--vocab %s: %s is id %lld there but the model was trained with "
                                 "id %ld (metadata graft.text.special_ids): another tokenizer",
                                 vocab, token, (long long)got, want),
                       1;
        }
        p = *end ? end + 1 : end;
    }
    return 0;
}

static int metadata_int(const char *cmd, const graft_model *m, const char *key, long min, long max,
                        long *out) {
    const char *v = cli_metadata(m, key);
    if (!v) return 0;
    char opt[64];
    snprintf(opt, sizeof opt, "metadata %s", key);
    return cli_int(cmd, opt, v, min, max, out) ? 1 : 0;
}

/* max_len: the option, the metadata, the ids input's fixed length, 128. A fixed length takes
 * every text padded to it (else each batch is padded to its longest); a longer max_len is cut to
 * it (said once), a shorter one still cuts the texts (rows padded to the fixed length). */
static int settle_max_len(const char *cmd, const graft_model *m, const text_overrides *o,
                          text_model *tm) {
    long len = o->max_len, fixed = -1;
    for (int i = 0; i < graft_model_input_count(m); i++) {
        graft_value_info v;
        graft_model_input_info(m, i, &v);
        if (!strcmp(v.name, tm->input[TEXT_IDS]) && v.ndim == 2 && v.dims[1] > 0) fixed = v.dims[1];
    }
    if (!len && metadata_int(cmd, m, "graft.text.max_len", 3, 8192, &len)) return 1;
    if (!len) len = fixed > 0 ? fixed : 128;
    text_fit_fixed_len(cmd, tm->input[TEXT_IDS], fixed, &len, &tm->data.pad_len);
    tm->data.max_len = (int)len;
    /* A fixed length takes every text padded to it; without a mask input the model attends to
     * the padding, so only one padding (max_len, as in training) gives a text the same result
     * whatever batch it is in. */
    tm->data.pad_to_longest = fixed < 0 && tm->input[TEXT_MASK] != NULL;
    return 0;
}

void text_fit_fixed_len(const char *cmd, const char *input, long fixed, long *max_len,
                        int *pad_len) {
    *pad_len = 0;
    if (fixed <= 0) return;
    if (*max_len > fixed)
        fprintf(stderr,
                "graft %s: note: input '%s' takes exactly %ld tokens: texts are cut to %ld tokens "
                "(not max-len %ld)\n",
                cmd, input, fixed, fixed, *max_len);
    if (*max_len > fixed) *max_len = fixed;
    if (*max_len < fixed) *pad_len = (int)fixed; /* cut at max_len, rows padded to fixed */
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* RFC 4648 base64 with padding (malloc'd), or NULL when out of memory. */
static char *base64_encode(const unsigned char *d, size_t n) {
    if (n > ((size_t)-1 - 1) / 4 * 3 - 3) return NULL;
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0) |
                     (i + 2 < n ? d[i + 2] : 0);
        *o++ = B64[v >> 18], *o++ = B64[v >> 12 & 63];
        *o++ = i + 1 < n ? B64[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? B64[v & 63] : '=';
    }
    *o = 0;
    return out;
}

/* The bytes of base64 text s (malloc'd into *out, *size); an error names the key and offset. */
static int base64_decode(const char *cmd, const char *key, const char *s, char **out,
                         size_t *size) {
    size_t n = strlen(s), pad = n >= 1 && s[n - 1] == '=' ? 1 + (n >= 2 && s[n - 2] == '=') : 0;
    if (n == 0 || n % 4 || n / 4 * 3 - pad > MAX_TOKENIZER_BYTES)
        return cli_error(cmd,
                         "metadata %s: base64 of %zu characters (want a multiple of 4 and "
                         "at most %u bytes decoded)",
                         key, n, MAX_TOKENIZER_BYTES),
               1;
    unsigned char *b = malloc(n / 4 * 3 + 1);
    if (!b) return cli_error(cmd, "metadata %s: out of memory", key), 1;
    size_t at = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        for (size_t k = 0; k < 4; k++) {
            const char *c = s[i + k] ? strchr(B64, s[i + k]) : NULL;
            if (!c && !(s[i + k] == '=' && i + k >= n - pad)) {
                free(b);
                return cli_error(cmd, "metadata %s: not base64 (character %zu)", key, i + k + 1), 1;
            }
            v = v << 6 | (uint32_t)(c ? c - B64 : 0);
        }
        b[at++] = (unsigned char)(v >> 16);
        if (i + 4 < n || pad < 2) b[at++] = (unsigned char)(v >> 8);
        if (i + 4 < n || pad < 1) b[at++] = (unsigned char)v;
    }
    *out = (char *)b, *size = at;
    return 0;
}

/* The tokenizer the model carries, as graft_tokenizer_load_memory takes it: *data is the
 * metadata's text, or decoded into *owned. 0 with *data NULL when it carries none. */
static int carried_tokenizer(const char *cmd, const graft_model *m, const char **data, size_t *size,
                             char **owned) {
    static const char *const text_keys[] = {"graft.text.tokenizer", "graft.text.vocab",
                                            "graft.text.bpe"};
    *data = NULL, *owned = NULL;
    for (size_t k = 0; k < sizeof text_keys / sizeof *text_keys && !*data; k++)
        if ((*data = cli_metadata(m, text_keys[k]))) *size = strlen(*data);
    const char *spm = cli_metadata(m, "graft.text.sentencepiece");
    if (*data || !spm) return 0;
    if (base64_decode(cmd, "graft.text.sentencepiece", spm, owned, size)) return 1;
    *data = *owned;
    return 0;
}

int text_model_open(const char *cmd, graft_ctx *ctx, const graft_model *m, const text_overrides *o,
                    text_model *tm) {
    *tm = (text_model){.data = GRAFT_TEXT_OPTIONS_INIT};
    long cased = o->cased;
    if (!o->cased && metadata_int(cmd, m, "graft.text.cased", 0, 1, &cased)) return 1;
    tm->data.cased = (int)cased;
    if (assign_roles(cmd, ctx, m, tm) || settle_max_len(cmd, m, o, tm)) return 1;
    const char *vocab = NULL;
    size_t size = 0;
    if (!o->vocab && carried_tokenizer(cmd, m, &vocab, &size, &tm->owned)) return 1;
    graft_status st;
    if (o->vocab) {
        tm->data.vocab_path = o->vocab;
        st = graft_tokenizer_load(ctx, o->vocab, tm->data.cased, &tm->tok);
    } else if (vocab) {
        tm->data.vocab_data = vocab, tm->data.vocab_size = size;
        st = graft_tokenizer_load_memory(ctx, vocab, size, tm->data.cased, &tm->tok);
    } else {
        return cli_error(cmd, "the model takes token ids but carries no tokenizer (metadata "
                              "graft.text.vocab, .tokenizer, .bpe or .sentencepiece); give its "
                              "vocab.txt, tokenizer.json, vocab.json + merges.txt or .model with "
                              "--vocab or --tokenizer"),
               1;
    }
    if (st != GRAFT_OK)
        return cli_error(cmd, "%s%s",
                         o->vocab ? "" : "the model's tokenizer: ", graft_last_error(ctx)),
               1;
    return o->vocab ? check_special_ids(cmd, m, tm, o->vocab) : 0;
}

void text_model_close(text_model *tm) {
    graft_tokenizer_free(tm->tok);
    free(tm->owned);
    tm->tok = NULL, tm->owned = NULL;
}

/* "ids=input_ids,mask=attention_mask,type_ids=token_type_ids" for the model's inputs. */
static int inputs_entry(const char *cmd, graft_ctx *ctx, const graft_model *m, char *out,
                        size_t size) {
    text_model roles = {0};
    if (assign_roles(cmd, ctx, m, &roles)) return 1;
    size_t at = 0;
    for (int r = 0; r < TEXT_ROLES; r++)
        if (roles.input[r])
            at += (size_t)snprintf(out + at, at < size ? size - at : 0, "%s%s=%s", at ? "," : "",
                                   ROLE_NAMES[r], roles.input[r]);
    return at < size ? 0 : (cli_error(cmd, "input names too long"), 1);
}

/* "TOKEN=ID,..." for the tokenizer's CLS, SEP, PAD and UNK roles (those it has, whose text
 * the list can hold). */
static void special_entry(const graft_tokenizer *tok, char *out, size_t size) {
    size_t at = 0;
    out[0] = 0;
    for (int r = 0; r < GRAFT_TOKEN_ROLE_COUNT; r++) {
        int64_t id = graft_tokenizer_special_id(tok, (graft_token_role)r);
        const char *t = graft_tokenizer_token(tok, id);
        if (!t || strpbrk(t, ",=") || strlen(t) > 200 || at + strlen(t) + 24 >= size) continue;
        at += (size_t)snprintf(out + at, size - at, "%s%s=%lld", at ? "," : "", t, (long long)id);
    }
}

int text_model_record(const char *cmd, graft_ctx *ctx, graft_model *m, const finetune_opts *o) {
    static const char *const poolings[] = {"cls", "none", "cls", "pooler", "mean", "spatial"};
    /* the tokenizer itself, under the key that says which kind it is */
    static const char *const keys[] = {"graft.text.vocab", "graft.text.tokenizer", "graft.text.bpe",
                                       "graft.text.sentencepiece"};
    graft_tokenizer *tok;
    if (graft_tokenizer_load(ctx, o->vocab, o->cased, &tok) != GRAFT_OK)
        return cli_error(cmd, "%s", graft_last_error(ctx)), 1;
    char special[1024], inputs[1024], num[32];
    special_entry(tok, special, sizeof special);
    int kind = graft_tokenizer_is_json(tok);
    size_t size;
    const char *data = graft_tokenizer_data(tok, &size);
    char *b64 = kind == 3 ? base64_encode((const unsigned char *)data, size) : NULL;
    int bad = inputs_entry(cmd, ctx, m, inputs, sizeof inputs);
    if (!bad && kind == 3 && !b64) bad = (cli_error(cmd, "%s: out of memory", o->vocab), 1);
    if (!bad && kind != 3 && strlen(data) != size)
        bad = (cli_error(cmd, "%s: a NUL byte in the vocabulary", o->vocab), 1);
    if (bad || (unsigned)kind >= sizeof keys / sizeof *keys) {
        free(b64), graft_tokenizer_free(tok);
        return bad ? 1 : (cli_error(cmd, "%s: unknown tokenizer kind %d", o->vocab, kind), 1);
    }
    graft_status st = graft_model_set_metadata(m, keys[kind], b64 ? b64 : data);
    free(b64), graft_tokenizer_free(tok);
    snprintf(num, sizeof num, "%d", o->cased != 0);
    if (st == GRAFT_OK) st = graft_model_set_metadata(m, "graft.text.cased", num);
    snprintf(num, sizeof num, "%d", o->max_len);
    if (st == GRAFT_OK) st = graft_model_set_metadata(m, "graft.text.max_len", num);
    if (st == GRAFT_OK) st = graft_model_set_metadata(m, "graft.text.special_ids", special);
    if (st == GRAFT_OK) st = graft_model_set_metadata(m, "graft.text.inputs", inputs);
    if (st == GRAFT_OK && (unsigned)o->pooling < sizeof poolings / sizeof *poolings)
        st = graft_model_set_metadata(m, "graft.text.pooling", poolings[o->pooling]);
    if (st != GRAFT_OK)
        return cli_error(cmd, "recording the tokenizer: %s", graft_last_error(ctx)), 1;
    return 0;
}
