/* fuzz_tokenizer.c: libFuzzer target: the tokenizer loader (BERT vocab.txt or Hugging Face
 * tokenizer.json, by content), then encoding: the bytes after the input's first NUL are the text
 * (else a few fixed texts), single and as a pair, truncated and padded. */
#include <stdint.h>
#include <string.h>

#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { FUZZ_CAP = 64 };

static void encode(graft_ctx *ctx, const graft_tokenizer *tok, const char *a, const char *b) {
    int64_t ids[FUZZ_CAP], types[FUZZ_CAP], mask[FUZZ_CAP];
    size_t len = 0;
    if (graft_tokenizer_encode(ctx, tok, a, b, FUZZ_CAP, 1, ids, types, mask, FUZZ_CAP, &len) !=
        GRAFT_OK)
        return;
    int64_t n = graft_tokenizer_vocab_size(tok);
    for (size_t i = 0; i < len && i < FUZZ_CAP; i++)
        if (mask[i] && (ids[i] < 0 || ids[i] >= n)) __builtin_trap(); /* an id outside the vocab */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static graft_ctx *ctx;
    if (!ctx && !(ctx = fuzz_ctx())) return 0;
    const uint8_t *nul = memchr(data, 0, size);
    size_t vocab_size = nul ? (size_t)(nul - data) : size;
    for (int cased = 0; cased < 2; cased++) {
        graft_tokenizer *tok = NULL;
        if (graft_tokenizer_load_memory(ctx, (const char *)data, vocab_size, cased, &tok) !=
            GRAFT_OK)
            continue;
        for (int64_t r = 0; r < GRAFT_TOKEN_ROLE_COUNT; r++)
            (void)graft_tokenizer_token(tok, graft_tokenizer_special_id(tok, (graft_token_role)r));
        if (nul) {
            size_t n = size - vocab_size - 1;
            char text[512];
            if (n >= sizeof text) n = sizeof text - 1;
            memcpy(text, nul + 1, n);
            text[n] = '\0';
            encode(ctx, tok, text, NULL);
            encode(ctx, tok, text, text);
        } else {
            encode(ctx, tok, "Hello, World! The naive cafe costs $3.50 [MASK] unaffable.", NULL);
            encode(ctx, tok, "na\xc3\xafve caf\xc3\xa9 \xe6\x9d\xb1\xe4\xba\xac\xf0\x9f\x98\x80",
                   "a second text, a bit longer than the first one");
        }
        graft_tokenizer_free(tok);
    }
    return 0;
}
