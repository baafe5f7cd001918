/* hf_unicode.c: the Unicode facts tokenizer.json pipelines need, from ICU: character classes,
 * NFC/NFD/NFKC/NFKD and grapheme clusters; plus the growing buffers the pipeline shares. */
#include <stdlib.h>
#include <string.h>
#include <unicode/ubrk.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/utext.h>

#include "data/hf_tokenizer.h"
#include "data/unicode.h"

int hf_buf_put(hf_buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) return -1;
        b->s = p, b->cap = cap;
    }
    if (n) memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
    return 0;
}

int hf_buf_cp(hf_buf *b, uint32_t cp) {
    char tmp[4];
    return hf_buf_put(b, tmp, (size_t)utf8_encode(cp, tmp));
}

void hf_buf_free(hf_buf *b) {
    free(b->s);
    memset(b, 0, sizeof *b);
}

bool hfu_is_whitespace(uint32_t cp) {
    return u_isUWhiteSpace((UChar32)cp) != 0;
}

bool hfu_is_letter(uint32_t cp) {
    return (U_GET_GC_MASK((UChar32)cp) & U_GC_L_MASK) != 0;
}

bool hfu_is_number(uint32_t cp) {
    return (U_GET_GC_MASK((UChar32)cp) & U_GC_N_MASK) != 0;
}

bool hfu_is_punct(uint32_t cp) {
    return (U_GET_GC_MASK((UChar32)cp) & U_GC_P_MASK) != 0;
}

bool hfu_is_mark(uint32_t cp) {
    return (U_GET_GC_MASK((UChar32)cp) & U_GC_M_MASK) != 0;
}

bool hfu_is_word(uint32_t cp) {
    UChar32 c = (UChar32)cp;
    return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) ||
           (U_GET_GC_MASK(c) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) ||
           u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL);
}

static const UNormalizer2 *normalizer_for(const char *form, UErrorCode *uerr) {
    if (!strcmp(form, "C")) return unorm2_getNFCInstance(uerr);
    if (!strcmp(form, "D")) return unorm2_getNFDInstance(uerr);
    if (!strcmp(form, "KC")) return unorm2_getNFKCInstance(uerr);
    return unorm2_getNFKDInstance(uerr);
}

graft_status hfu_normalize(const char *form, const char *s, size_t n, hf_buf *out, graft_err *e) {
    out->n = 0;
    if (n > INT32_MAX / 8)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "text too long (%zu bytes)", n);
    UErrorCode uerr = U_ZERO_ERROR;
    const UNormalizer2 *norm = normalizer_for(form, &uerr);
    int32_t n16 = 0;
    u_strFromUTF8(NULL, 0, &n16, s, (int32_t)n, &uerr);
    if (uerr == U_BUFFER_OVERFLOW_ERROR) uerr = U_ZERO_ERROR;
    /* NFKD expands at most 18 times (U+FDFA); room for that avoids a second pass */
    size_t cap16 = (size_t)n16 * 18 + 1;
    UChar *in16 = malloc(((size_t)n16 + 1) * sizeof *in16), *out16 = malloc(cap16 * sizeof *out16);
    graft_status st = GRAFT_OK;
    if (!in16 || !out16) {
        st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory normalizing %zu bytes", n);
        goto done;
    }
    u_strFromUTF8(in16, n16 + 1, NULL, s, (int32_t)n, &uerr);
    int32_t m16 = unorm2_normalize(norm, in16, n16, out16, (int32_t)cap16, &uerr);
    int32_t n8 = 0;
    if (U_SUCCESS(uerr)) u_strToUTF8(NULL, 0, &n8, out16, m16, &uerr);
    if (uerr == U_BUFFER_OVERFLOW_ERROR) uerr = U_ZERO_ERROR;
    if (U_SUCCESS(uerr)) {
        if (out->cap < (size_t)n8 + 1) {
            char *p = realloc(out->s, (size_t)n8 + 1);
            if (!p) {
                st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory normalizing");
                goto done;
            }
            out->s = p, out->cap = (size_t)n8 + 1;
        }
        u_strToUTF8(out->s, n8 + 1, NULL, out16, m16, &uerr);
        out->n = (size_t)n8;
        out->s[n8] = 0;
    }
    if (U_FAILURE(uerr))
        st = err_set(e, GRAFT_E_INVALID_ARGUMENT, "NF%s normalization failed: %s", form,
                     u_errorName(uerr));
done:
    free(in16);
    free(out16);
    return st;
}

graft_status hfu_graphemes(const char *s, size_t n, size_t **bounds, size_t *count, graft_err *e) {
    UErrorCode uerr = U_ZERO_ERROR;
    *bounds = NULL, *count = 0;
    size_t cap = 16, k = 0;
    size_t *b = malloc(cap * sizeof *b);
    UText *ut = utext_openUTF8(NULL, s, (int64_t)n, &uerr);
    UBreakIterator *bi = ubrk_open(UBRK_CHARACTER, "", NULL, 0, &uerr);
    if (U_SUCCESS(uerr)) ubrk_setUText(bi, ut, &uerr);
    graft_status st = GRAFT_OK;
    if (!b)
        st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    else if (U_FAILURE(uerr))
        st = err_set(e, GRAFT_E_INVALID_ARGUMENT, "grapheme segmentation failed: %s",
                     u_errorName(uerr));
    for (int32_t at = st == GRAFT_OK ? ubrk_first(bi) : UBRK_DONE; at != UBRK_DONE;
         at = ubrk_next(bi)) {
        if (k == cap) {
            size_t *nb = realloc(b, (cap *= 2) * sizeof *b);
            if (!nb) {
                st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
                break;
            }
            b = nb;
        }
        b[k++] = (size_t)at;
    }
    if (bi) ubrk_close(bi);
    utext_close(ut);
    if (st != GRAFT_OK) {
        free(b);
        return st;
    }
    if (k == 0 || b[0] != 0) { /* empty text: the single boundary 0 */
        b[0] = 0, k = 1;
    }
    *bounds = b, *count = k;
    return GRAFT_OK;
}
