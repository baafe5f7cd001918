/* cmd_tokenize.c: `graft tokenize`: BERT WordPiece ids of each input line as JSON lines. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "graft.h"

static void tokenize_usage(FILE *f) {
    fprintf(
        f,
        "usage: graft tokenize --vocab VOCAB.txt [--cased] [--max-len N] [--pad] [--pair] [FILE]\n"
        "\n"
        "Prints, for each line of FILE (standard input without FILE), one JSON line\n"
        "{\"input_ids\": [...], \"token_type_ids\": [...], \"attention_mask\": [...]}\n"
        "as BERT's tokenizer makes them: [CLS] text [SEP].\n"
        "  --vocab FILE   the model's vocab.txt (required)\n"
        "  --cased        keep case and accents (cased vocabularies); default: uncased\n"
        "  --max-len N    truncate to N tokens, [CLS] and [SEP] included\n"
        "  --pad          pad with [PAD] up to --max-len\n"
        "  --pair         a tab splits each line into two texts: [CLS] a [SEP] b [SEP]\n");
}

typedef struct tokenize_args {
    const char *vocab, *file;
    bool cased, pair, pad;
    int max_len;
} tokenize_args;

/* Returns 0, 1 after --help, or -1 after printing what is wrong. */
static int parse_args(int argc, char **argv, tokenize_args *a) {
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
            tokenize_usage(stdout);
            return 1;
        } else if (strcmp(s, "--vocab") == 0 && i + 1 < argc) {
            a->vocab = argv[++i];
        } else if (strcmp(s, "--max-len") == 0 && i + 1 < argc) {
            char *end;
            errno = 0;
            long v = strtol(argv[++i], &end, 10);
            if (errno || *end || end == argv[i] || v < 1 || v > 1 << 20) {
                fprintf(stderr, "graft tokenize: --max-len wants a positive integer, not '%s'\n",
                        argv[i]);
                return -1;
            }
            a->max_len = (int)v;
        } else if (strcmp(s, "--cased") == 0) {
            a->cased = true;
        } else if (strcmp(s, "--pair") == 0) {
            a->pair = true;
        } else if (strcmp(s, "--pad") == 0) {
            a->pad = true;
        } else if (s[0] == '-' && s[1] != 0) {
            fprintf(stderr, "graft tokenize: unknown or incomplete option '%s' (try --help)\n", s);
            return -1;
        } else if (!a->file) {
            a->file = s;
        } else {
            fprintf(stderr, "graft tokenize: more than one input file ('%s', '%s')\n", a->file, s);
            return -1;
        }
    }
    if (!a->vocab) {
        fprintf(stderr, "graft tokenize: --vocab VOCAB.txt is required (try --help)\n");
        return -1;
    }
    if (a->pad && a->max_len == 0) {
        fprintf(stderr, "graft tokenize: --pad needs --max-len\n");
        return -1;
    }
    if (a->max_len > 0 && a->max_len < (a->pair ? 3 : 2)) {
        fprintf(stderr, "graft tokenize: --max-len %d leaves no room for [CLS] and [SEP]\n",
                a->max_len);
        return -1;
    }
    return 0;
}

static void print_array(const char *key, const int64_t *v, size_t n, const char *tail) {
    printf("\"%s\": [", key);
    for (size_t i = 0; i < n; i++) printf(i ? ", %lld" : "%lld", (long long)v[i]);
    printf("]%s", tail);
}

/* Encode one line (without its newline) and print it; returns 0, or -1 after a warning. */
static int tokenize_line(graft_ctx *ctx, const graft_tokenizer *tok, const tokenize_args *a,
                         char *line, const char *name, long line_no, int64_t *buf, size_t cap) {
    char *b = NULL;
    if (a->pair) {
        char *tab = strchr(line, '\t');
        b = tab ? tab + 1 : line + strlen(line);
        if (tab) *tab = 0;
    }
    size_t n = 0;
    graft_status st = graft_tokenizer_encode(ctx, tok, line, b, a->max_len, a->pad, buf, buf + cap,
                                             buf + 2 * cap, cap, &n);
    if (st != GRAFT_OK) {
        fprintf(stderr, "graft tokenize: %s:%ld: %s (line skipped)\n", name, line_no,
                graft_last_error(ctx));
        return -1;
    }
    if (a->pad) n = (size_t)a->max_len;
    printf("{");
    print_array("input_ids", buf, n, ", ");
    print_array("token_type_ids", buf + cap, n, ", ");
    print_array("attention_mask", buf + 2 * cap, n, "}\n");
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    tokenize_args a = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc != 0) return rc > 0 ? 0 : 2;
    FILE *in = a.file ? fopen(a.file, "rb") : stdin;
    const char *name = a.file ? a.file : "<stdin>";
    if (!in) {
        fprintf(stderr, "graft tokenize: %s: %s\n", a.file, strerror(errno));
        return 1;
    }
    graft_ctx *ctx = NULL;
    graft_tokenizer *tok = NULL;
    if (graft_ctx_create(NULL, &ctx) != GRAFT_OK ||
        graft_tokenizer_load(ctx, a.vocab, a.cased, &tok) != GRAFT_OK) {
        fprintf(stderr, "graft tokenize: %s\n", ctx ? graft_last_error(ctx) : "out of memory");
        graft_ctx_free(ctx);
        if (a.file) fclose(in);
        return 1;
    }
    char *line = NULL;
    size_t line_cap = 0, cap = 0;
    int64_t *buf = NULL; /* (3, cap): ids, type ids, mask */
    long line_no = 0;
    int failed = 0;
    ssize_t got;
    while ((got = getline(&line, &line_cap, in)) >= 0) {
        line_no++;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = 0;
        /* every token covers at least one byte, so bytes + 3 (or max_len) is enough room */
        size_t need = (size_t)got + 3 > (size_t)a.max_len ? (size_t)got + 3 : (size_t)a.max_len;
        if (need > cap) {
            free(buf);
            cap = need * 2;
            buf = malloc(3 * cap * sizeof *buf);
            if (!buf) {
                fprintf(stderr, "graft tokenize: out of memory at %s:%ld\n", name, line_no);
                failed = 1;
                break;
            }
        }
        if (tokenize_line(ctx, tok, &a, line, name, line_no, buf, cap)) failed = 1;
    }
    if (ferror(in)) {
        fprintf(stderr, "graft tokenize: %s: read error\n", name);
        failed = 1;
    }
    free(buf);
    free(line);
    graft_tokenizer_free(tok);
    graft_ctx_free(ctx);
    if (a.file) fclose(in);
    return failed;
}
