/* cmd_tokenize.c: `graft tokenize`: token ids of each input line as JSON lines (BERT's vocab.txt
 * or a Hugging Face tokenizer.json). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "cli_util.h"
#include "commands.h"
#include "graft.h"

typedef struct tokenize_args {
    const char *vocab, *file;
    bool cased, pair, pad, file_given;
    int max_len;
} tokenize_args;

static const cli_option tokenize_options[] = {
    {"vocab", "FILE|DIR", NULL, NULL, NULL,
     "the tokenizer (required): BERT's vocab.txt (one token a line), a Hugging Face "
     "tokenizer.json (WordPiece, byte-level BPE, Unigram), a GPT-2/RoBERTa vocab.json (with "
     "merges.txt beside it) or a SentencePiece .model, told apart by content; or a folder "
     "holding one (docs/data.md)"},
    {"tokenizer", "FILE|DIR", NULL, NULL, NULL, "the same as --vocab"},
    {"cased", NULL, NULL, NULL, NULL,
     "keep case and accents (cased vocab.txt); without it text is lower-cased and accents "
     "stripped (a tokenizer.json normalizes as it says)"},
    {"max-len", "N", NULL, NULL, NULL,
     "truncate to N tokens, special tokens ([CLS] and [SEP], <s> and </s>) included (default: no "
     "limit)"},
    {"pad", NULL, NULL, NULL, NULL, "pad with the padding token ([PAD], <pad>) up to --max-len"},
    {"pair", NULL, NULL, NULL, NULL,
     "a tab splits each line into two texts: [CLS] a [SEP] b [SEP] (or the tokenizer.json's pair "
     "template)"},
};

static const cli_command tokenize_command = {
    .name = "tokenize",
    .usage = "--vocab vocab.txt|tokenizer.json [--cased] [--max-len N] [--pad] [--pair] [FILE]",
    .about = "Tokenizes each line of FILE (standard input without FILE, or with -) as BERT's "
             "WordPiece tokenizer does with a vocab.txt ([CLS] text [SEP], the ids equal to "
             "Hugging Face's BertTokenizer's), or as a Hugging Face tokenizer.json says (the ids "
             "equal to the tokenizers package's).",
    .options = tokenize_options,
    .n_options = CLI_COUNT(tokenize_options),
    .examples = "echo 'Hello, world!' | graft tokenize --vocab tests/data/tokenizer/vocab.txt "
                "--max-len=16\n"
                "graft tokenize --vocab vocab.txt --pair --max-len 64 --pad pairs.tsv > ids.jsonl\n"
                "graft tokenize --tokenizer roberta/tokenizer.json --max-len 64 texts.txt",
    .writes = "One JSON line per input line on stdout: {\"input_ids\": [...], "
              "\"token_type_ids\": [...], \"attention_mask\": [...]}; a line that cannot be "
              "tokenized (invalid UTF-8) gets a warning on stderr and no output line.",
    .exit_status = "0 when every line was tokenized, 1 when the vocabulary or FILE cannot be "
                   "read or a line was skipped, 2 for bad usage.",
};

/* Returns 0, 1 after --help, or -1 after printing what is wrong. */
static int parse_args(int argc, char **argv, tokenize_args *a) {
    const cli_option *o;
    const char *v;
    cli_parser p;
    int k;
    cli_parser_init(&p, &tokenize_command, NULL, argc, argv);
    while ((k = cli_next(&p, &o, &v)) > 0) {
        long n;
        if (k == CLI_POSITIONAL) {
            if (a->file_given) {
                fprintf(stderr, "graft tokenize: more than one input file ('%s', '%s')\n",
                        a->file ? a->file : "-", v);
                return -1;
            }
            a->file = strcmp(v, "-") ? v : NULL;
            a->file_given = true;
        } else if (!strcmp(o->name, "vocab") || !strcmp(o->name, "tokenizer")) {
            a->vocab = v;
        } else if (!strcmp(o->name, "max-len")) {
            if (cli_int("tokenize", "--max-len", v, 1, 1 << 20, &n)) return -1;
            a->max_len = (int)n;
        } else if (!strcmp(o->name, "cased")) {
            a->cased = true;
        } else if (!strcmp(o->name, "pair")) {
            a->pair = true;
        } else {
            a->pad = true;
        }
    }
    if (k < 0) return k == CLI_HELP ? 1 : -1;
    if (!a->vocab) {
        fprintf(stderr, "graft tokenize: --vocab FILE (a vocab.txt or tokenizer.json) is required "
                        "(try --help)\n");
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
