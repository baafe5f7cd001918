/* cli_util.c: option parsing, model metadata, image options and scores shared by CLI commands. */
#include "cli_util.h"

#include "../core/context.h"

#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int cli_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "graft %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

int cli_int(const char *cmd, const char *opt, const char *text, long min, long max, long *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || errno == ERANGE || v < min || v > max) {
        cli_error(cmd, "%s '%s' is not a whole number from %ld to %ld", opt, text, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_int_list(const char *cmd, const char *opt, const char *text, long min, long max, long *out,
                 int cap) {
    int n = 0;
    const char *p = text;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || errno == ERANGE || v < min || v > max ||
            n == cap) {
            cli_error(cmd, "%s '%s' is not a list of at most %d whole numbers from %ld to %ld", opt,
                      text, cap, min, max);
            return -1;
        }
        out[n++] = v;
        if (!*end) return n;
        p = end + 1;
    }
}

const char *cli_metadata(const graft_model *m, const char *key) {
    for (int i = 0; i < graft_model_metadata_count(m); i++) {
        const char *k, *v;
        if (graft_model_metadata(m, i, &k, &v) == GRAFT_OK && strcmp(k, key) == 0) return v;
    }
    return NULL;
}

static void put_utf8(char **q, unsigned long c) {
    char *o = *q;
    if (c < 0x80) {
        *o++ = (char)c;
    } else if (c < 0x800) {
        *o++ = (char)(0xC0 | (c >> 6));
        *o++ = (char)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        *o++ = (char)(0xE0 | (c >> 12));
        *o++ = (char)(0x80 | ((c >> 6) & 0x3F));
        *o++ = (char)(0x80 | (c & 0x3F));
    } else {
        *o++ = (char)(0xF0 | (c >> 18));
        *o++ = (char)(0x80 | ((c >> 12) & 0x3F));
        *o++ = (char)(0x80 | ((c >> 6) & 0x3F));
        *o++ = (char)(0x80 | (c & 0x3F));
    }
    *q = o;
}

static int hex4(const char *p, unsigned long *out) {
    char buf[5] = {0};
    for (int i = 0; i < 4; i++) {
        if (!p[i] || !strchr("0123456789abcdefABCDEF", p[i])) return -1;
        buf[i] = p[i];
    }
    *out = strtoul(buf, NULL, 16);
    return 0;
}

/* One JSON string starting at *p (on its opening quote): a malloc'ed UTF-8 copy, or NULL. */
static char *json_read_string(const char **p) {
    const char *s = *p + 1;
    char *out = malloc(strlen(s) * 2 + 1), *q = out;
    if (!out) return NULL;
    for (; *s && *s != '"'; s++) {
        if ((unsigned char)*s < 0x20) break;
        if (*s != '\\') {
            *q++ = *s;
            continue;
        }
        s++;
        const char *simple = strchr("\"\\/bfnrt", *s);
        if (*s && simple) {
            *q++ = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            continue;
        }
        unsigned long c, lo;
        if (*s != 'u' || hex4(s + 1, &c) != 0) break;
        s += 4;
        if (c >= 0xD800 && c < 0xDC00 && s[1] == '\\' && s[2] == 'u' && hex4(s + 3, &lo) == 0 &&
            lo >= 0xDC00 && lo < 0xE000) {
            c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
            s += 6;
        }
        put_utf8(&q, c);
    }
    if (*s != '"') {
        free(out);
        return NULL;
    }
    *q = '\0';
    *p = s + 1;
    return out;
}

static const char *skip_space(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

int cli_model_classes(const char *cmd, const graft_model *m, char ***names, int *n) {
    *names = NULL;
    *n = 0;
    const char *json = cli_metadata(m, "graft.classes");
    if (!json) return 0;
    const char *p = skip_space(json);
    int ok = *p == '[';
    p = skip_space(p + 1);
    if (ok && *p == ']')
        p = skip_space(p + 1);
    else
        while (ok) {
            char **grown = *p == '"' ? realloc(*names, sizeof **names * (size_t)(*n + 1)) : NULL;
            if (!grown || !(grown[*n] = json_read_string(&p))) {
                if (grown) *names = grown;
                ok = 0;
                break;
            }
            *names = grown;
            ++*n;
            p = skip_space(p);
            if (*p == ']') {
                p = skip_space(p + 1);
                break;
            }
            ok = *p == ',';
            p = skip_space(p + 1);
        }
    if (!ok || *p) {
        cli_free_classes(*names, *n);
        *names = NULL;
        *n = 0;
        cli_error(cmd, "the model's metadata graft.classes is not a JSON list of strings: %.80s",
                  json);
        return -1;
    }
    return 0;
}

void cli_free_classes(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

int cli_output_is_probabilities(const char *name, const float *scores, int64_t rows, int64_t cols) {
    if (strcmp(name, "probabilities") == 0) return 1;
    if (strcmp(name, "logits") == 0) return 0;
    for (int64_t r = 0; r < rows; r++) {
        double sum = 0;
        for (int64_t c = 0; c < cols; c++) {
            float x = scores[r * cols + c];
            if (!(x >= 0 && x <= 1)) return 0;
            sum += x;
        }
        if (fabs(sum - 1) > 1e-3) return 0;
    }
    return rows > 0;
}

void cli_row_probabilities(const float *row, int64_t cols, int is_probs, float *out) {
    if (is_probs) {
        memcpy(out, row, sizeof *out * (size_t)cols);
        return;
    }
    float mx = -INFINITY;
    for (int64_t c = 0; c < cols; c++)
        if (row[c] > mx) mx = row[c];
    double sum = 0;
    for (int64_t c = 0; c < cols; c++) sum += (out[c] = expf(row[c] - mx));
    for (int64_t c = 0; c < cols; c++) out[c] = (float)(out[c] / sum);
}

void cli_top_k(const float *v, int64_t n, int k, int *out) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int64_t i = 0; i < n; i++) {
            int taken = 0;
            for (int t = 0; t < j && !taken; t++) taken = out[t] == i;
            if (!taken && (best < 0 || v[i] > v[best])) best = (int)i;
        }
        out[j] = best;
    }
}

void cli_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

int cli_device(const char *cmd, const char *value, char *out, size_t out_size) {
    bool ok = !strcmp(value, "cpu") || !strcmp(value, "auto") || !strcmp(value, "cuda");
    if (!ok && !strncmp(value, "cuda:", 5) && value[5]) {
        ok = true;
        for (const char *c = value + 5; *c; c++) ok = ok && *c >= '0' && *c <= '9';
    }
    if (!ok) return cli_error(cmd, "--device '%s': expected cpu, auto, cuda or cuda:N", value);
    if (strncmp(value, "cuda", 4) == 0 && !graft_cuda_built())
        return cli_error(cmd, "--device %s: this graft was built without CUDA (try --device cpu)",
                         value);
    if (strlen(value) >= out_size) return cli_error(cmd, "--device '%s' is too long", value);
    snprintf(out, out_size, "%s", value);
    return 0;
}

int cli_precision(const char *cmd, const char *value, graft_dtype *out) {
    if (!strcmp(value, "fp32"))
        *out = GRAFT_DTYPE_F32;
    else if (!strcmp(value, "fp16"))
        *out = GRAFT_DTYPE_F16;
    else if (!strcmp(value, "bf16"))
        *out = GRAFT_DTYPE_BF16;
    else
        return cli_error(cmd, "--precision '%s': expected fp32, fp16 or bf16", value);
    return 0;
}

graft_ctx *cli_ctx(const char *cmd, int threads, const char *device) {
    graft_ctx_options opt = GRAFT_CTX_OPTIONS_INIT;
    opt.num_threads = threads;
    opt.device = cli_resolve_device(cmd, device);
    /* GRAFT_LOG=debug|info shows the library's messages below warnings (stderr). */
    const char *level = getenv("GRAFT_LOG");
    if (level && strcmp(level, "debug") == 0) opt.log_level = GRAFT_LOG_DEBUG;
    if (level && strcmp(level, "info") == 0) opt.log_level = GRAFT_LOG_INFO;
    graft_ctx *ctx = NULL;
    graft_status st = graft_ctx_create(&opt, &ctx);
    if (st != GRAFT_OK) {
        cli_error(cmd, "cannot create a context: %s", graft_status_str(st));
        return NULL;
    }
    return ctx;
}

void cli_ctx_keep_batchnorm(graft_ctx *ctx, int on) {
    ctx->options.keep_batchnorm = on;
}

int cli_uint8_input(const char *cmd, graft_ctx *ctx, graft_model *m) {
    graft_image_options o = GRAFT_IMAGE_OPTIONS_INIT;
    int channels = 3;
    for (int i = 0; i < graft_model_input_count(m); i++) {
        graft_value_info v;
        if (graft_model_input_info(m, i, &v) == GRAFT_OK && v.ndim == 4 && v.dims[1] == 1)
            channels = 1;
    }
    if (graft_image_options_from_model(m, &o) != GRAFT_OK ||
        graft_model_set_uint8_input(m, NULL, 1, o.mean, o.std, channels) != GRAFT_OK) {
        fprintf(stderr, "graft %s: --uint8: %s\n", cmd, graft_last_error(ctx));
        return 1;
    }
    return 0;
}
