/* cli_args.c: the graft tool's option parser ("did you mean" by edit distance, choice lists) and
 * its help printer (topics, word wrap to the terminal, shell-continued examples). */
#include "cli_args.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int cli_help_width(void) {
    struct winsize ws;
    long w = 0;
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
        w = ws.ws_col;
    } else {
        const char *columns = getenv("COLUMNS");
        char *end;
        if (columns && *columns) {
            w = strtol(columns, &end, 10);
            if (*end) w = 0;
        }
    }
    if (w <= 0) w = 80;
    return w < CLI_MIN_WIDTH ? CLI_MIN_WIDTH : w > CLI_MAX_WIDTH ? CLI_MAX_WIDTH : (int)w;
}

/* ---- edit distance and suggestions ---- */

static int same_letter(char a, char b) {
    if (a == '_') a = '-';
    if (b == '_') b = '-';
    return tolower((unsigned char)a) == tolower((unsigned char)b);
}

/* Optimal string alignment distance (insertions, deletions, substitutions and swaps of two
 * neighbours each cost 1), ignoring case and taking '_' for '-'; stops counting past 9. */
static int distance(const char *a, size_t n, const char *b) {
    size_t m = strlen(b);
    if (n > 64 || m > 64) return 10;
    int d[65][65];
    for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int best = d[i - 1][j - 1] + !same_letter(a[i - 1], b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && same_letter(a[i - 1], b[j - 2]) &&
                same_letter(a[i - 2], b[j - 1]) && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m] > 9 ? 10 : d[n][m];
}

const char *cli_nearest(const char *word, size_t len, const char *const *names, int n) {
    /* One edit for short words, up to three for long ones: near enough to be a typo. */
    int limit = (int)len / 3 < 1 ? 1 : (int)len / 3 > 3 ? 3 : (int)len / 3;
    const char *best = NULL, *prefixed = NULL;
    int best_d = limit + 1, prefixes = 0;
    for (int i = 0; i < n; i++) {
        int d = distance(word, len, names[i]);
        if (d < best_d) best_d = d, best = names[i];
        if (len >= 3 && strlen(names[i]) > len && strncmp(names[i], word, len) == 0)
            prefixes++, prefixed = names[i];
    }
    return best ? best : prefixes == 1 ? prefixed : NULL;
}

/* ---- parsing ---- */

const cli_option *cli_find(const cli_command *c, const char *name, size_t len) {
    for (int i = 0; i < c->n_options; i++)
        if (strlen(c->options[i].name) == len && strncmp(c->options[i].name, name, len) == 0)
            return &c->options[i];
    return NULL;
}

static void print_label(const char *label) {
    if (label)
        fprintf(stderr, "graft %s: ", label);
    else
        fputs("graft: ", stderr);
}

/* "unknown option SHOWN" (as typed), with the nearest of c's options to name[0..len). */
static int unknown(const char *label, const cli_command *c, const char *shown, const char *name,
                   size_t len) {
    const char *names[256];
    int n = 0;
    for (int i = 0; i < c->n_options && n < 255; i++) names[n++] = c->options[i].name;
    names[n++] = "help";
    const char *near = cli_nearest(name, len, names, n);
    if (near && !strcmp(shown, "--") && strlen(near) == len && !strncmp(near, name, len))
        near = NULL; /* "--help" in a config file: not a suggestion of itself */
    print_label(label);
    fprintf(stderr, "unknown option %s%.*s", shown, (int)len, name);
    if (near)
        fprintf(stderr, "; did you mean --%s?\n", near);
    else if (c->name)
        fprintf(stderr, " (see graft %s --help)\n", c->name);
    else
        fprintf(stderr, " (see graft --help)\n");
    return 2;
}

int cli_unknown_option(const char *label, const cli_command *c, const char *name, size_t len) {
    return unknown(label, c, "--", name, len);
}

int cli_choice(const char *label, const cli_option *o, const char *v) {
    for (int i = 0; o->choices[i]; i++)
        if (strcmp(o->choices[i], v) == 0) return i;
    print_label(label);
    fprintf(stderr, "--%s %s: expected one of ", o->name, v);
    for (int i = 0; o->choices[i]; i++) fprintf(stderr, "%s%s", i ? ", " : "", o->choices[i]);
    fputc('\n', stderr);
    return -1;
}

void cli_parser_init(cli_parser *p, const cli_command *c, const char *label, int argc,
                     char **argv) {
    *p = (cli_parser){c, label ? label : c->name, argc, 1, argv, 0};
}

int cli_stop_status(int k) {
    return k == CLI_HELP ? 0 : 2;
}

/* An argument that is an option of its own, not a value: "--x" (negative numbers are values). */
static int looks_like_option(const char *s) {
    return s[0] == '-' && s[1] == '-' && s[2];
}

static int parse_error(const cli_parser *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int parse_error(const cli_parser *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    print_label(p->label);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return CLI_ERROR;
}

int cli_next(cli_parser *p, const cli_option **opt, const char **value) {
    *opt = NULL;
    *value = NULL;
    if (p->next >= p->argc) return CLI_DONE;
    const char *a = p->argv[p->next++];
    if (p->rest_positional || a[0] != '-' || !a[1]) {
        *value = a;
        return CLI_POSITIONAL;
    }
    if (strcmp(a, "--") == 0) {
        p->rest_positional = 1;
        return cli_next(p, opt, value);
    }
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
        cli_help(p->cmd, stdout);
        return CLI_HELP;
    }
    const char *name = a + (a[1] == '-' ? 2 : 1), *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const cli_option *o = a[1] == '-' ? cli_find(p->cmd, name, len) : NULL;
    if (!o && a[1] == '-' && len == 4 && strncmp(name, "help", 4) == 0)
        return parse_error(p, "--help takes no value");
    if (!o) return unknown(p->label, p->cmd, a[1] == '-' ? "--" : "-", name, len), CLI_ERROR;
    if (!o->value) {
        if (eq) return parse_error(p, "--%s takes no value (given '%s')", o->name, eq + 1);
        *opt = o;
        return CLI_OPTION;
    }
    const char *v = eq ? eq + 1 : NULL;
    if (!v && p->next < p->argc && !looks_like_option(p->argv[p->next])) v = p->argv[p->next++];
    if (!v) return parse_error(p, "--%s needs a value (%s)", o->name, o->value);
    if (o->choices && cli_choice(p->label, o, v) < 0) return CLI_ERROR;
    *opt = o;
    *value = v;
    return CLI_OPTION;
}

/* ---- help ---- */

typedef struct writer {
    FILE *f;
    int width, col;
    const char *margin; /* starts continuation lines instead of spaces (a comment's "  # ") */
} writer;

static void put(writer *w, const char *s, size_t n) {
    fwrite(s, 1, n, w->f);
    w->col += (int)n;
}

static void indent_to(writer *w, int col) {
    while (w->col < col) put(w, " ", 1);
}

static void newline(writer *w) {
    fputc('\n', w->f);
    w->col = 0;
}

static void continue_line(writer *w, int indent) {
    newline(w);
    if (w->margin)
        put(w, w->margin, strlen(w->margin));
    else
        indent_to(w, indent);
}

/* The words of s (split at spaces and newlines) from the current column, continuation lines at
 * column indent; a word longer than a whole line is split. */
static void words(writer *w, const char *s, int indent) {
    int fresh = 1; /* nothing written on this line yet */
    for (;;) {
        s += strspn(s, " \n");
        size_t n = strcspn(s, " \n");
        if (!n) return;
        if (!fresh && w->col + 1 + (int)n > w->width) {
            continue_line(w, indent);
            fresh = 1;
        }
        if (!fresh) put(w, " ", 1);
        while (w->col + (int)n > w->width && w->width - w->col > 0) {
            size_t room = (size_t)(w->width - w->col);
            put(w, s, room);
            s += room, n -= room;
            continue_line(w, indent);
        }
        put(w, s, n);
        s += n;
        fresh = 0;
    }
}

/* The length of the shell word at s: up to a space outside quotes. */
static size_t shell_word(const char *s) {
    char quote = 0;
    size_t n = 0;
    for (; s[n] && (quote || s[n] != ' '); n++)
        if (quote ? s[n] == quote : (s[n] == '\'' || s[n] == '"')) quote = quote ? 0 : s[n];
    return n;
}

/* The length of the next unit of a command line at s: a word, or an option and its value
 * ("--data DIR"), kept on one line (c's flags take no value). */
static size_t command_unit(const cli_command *c, const char *s) {
    size_t n = shell_word(s);
    const char *next = s + n + strspn(s + n, " ");
    const cli_option *o = n > 2 ? cli_find(c, s + 2, n - 2) : NULL;
    if (s[0] == '-' && s[1] == '-' && !memchr(s, '=', n) && *next && *next != '-' &&
        !(o && !o->value))
        n = (size_t)(next - s) + shell_word(next);
    return n;
}

/* A shell command at column 2, broken at spaces into lines ending in " \" and continued at
 * column 6, so that it can be pasted as it is. */
static void command_line(writer *w, const cli_command *c, const char *s) {
    indent_to(w, 2);
    int fresh = 1;
    for (;;) {
        s += strspn(s, " ");
        size_t n = command_unit(c, s);
        if (!n) break;
        if (6 + (int)n + 2 > w->width) n = shell_word(s); /* too long to keep together */
        int last = s[n + strspn(s + n, " ")] == 0;
        if (!fresh && w->col + 1 + (int)n + (last ? 0 : 2) > w->width) {
            put(w, " \\", 2);
            newline(w);
            indent_to(w, 6);
            fresh = 1;
        }
        if (!fresh) put(w, " ", 1);
        put(w, s, n);
        s += n;
        fresh = 0;
    }
    newline(w);
}

/* Length of an item's term: up to the two spaces before its description, or the whole line. */
static size_t term_length(const char *t) {
    size_t line = strcspn(t, "\n");
    const char *sep = strstr(t, "  ");
    return sep && (size_t)(sep - t) < line ? (size_t)(sep - t) : line;
}

/* "  TERM  DESCRIPTION" items (items[] is modified): the descriptions in one column, or below
 * a term too long for it. */
static void term_list(writer *w, char *items, int indent) {
    int col = indent + 4, cap = w->width * 2 / 5;
    for (const char *p = items; p; p = strstr(p + 1, "\n  ")) {
        int n = (int)term_length(p + strspn(p, "\n "));
        if (indent + n + 2 <= cap && indent + n + 2 > col) col = indent + n + 2;
    }
    for (char *p = items; p;) {
        char *t = p + strspn(p, "\n "), *next = strstr(t, "\n  ");
        if (next) *next = 0;
        size_t n = term_length(t);
        indent_to(w, indent);
        put(w, t, n);
        if (w->col + 2 > col) newline(w);
        indent_to(w, col);
        words(w, t + n, col);
        newline(w);
        p = next ? next + 1 : NULL;
    }
}

/* Paragraphs separated by blank lines, each at column indent: prose, a list of terms, or prose
 * over a list. */
static void text(writer *w, const char *s, int indent) {
    char *copy = strdup(s);
    if (!copy) return;
    int first = 1;
    for (char *p = copy; p && *p;) {
        char *end = strstr(p, "\n\n");
        if (end) *end = 0;
        if (!first) newline(w);
        first = 0;
        char *list = strncmp(p, "  ", 2) == 0 ? p : strstr(p, "\n  ");
        if (list != p) { /* prose, perhaps a heading over a list */
            if (list) *list = 0;
            indent_to(w, indent);
            words(w, p, indent);
            newline(w);
        }
        if (list) term_list(w, list == p ? p : list + 1, indent + 2);
        p = end ? end + 2 : NULL;
    }
    free(copy);
}

/* "--name VALUE" as the left column of an option. */
static int option_left(const cli_option *o, char *buf, size_t size) {
    return snprintf(buf, size, "--%s%s%s", o->name, o->value ? " " : "", o->value ? o->value : "");
}

/* One option's help with its choices (unless the placeholder lists them) and default. */
static void option_help(const cli_option *o, char *buf, size_t size) {
    size_t at = (size_t)snprintf(buf, size, "%s", o->help);
    if (o->choices && o->value && !strchr(o->value, '|')) {
        for (int i = 0; o->choices[i] && at < size; i++)
            at += (size_t)snprintf(buf + at, size - at, "%s%s", i ? ", " : "; one of ",
                                   o->choices[i]);
    }
    if (o->dflt && at < size) snprintf(buf + at, size - at, " (default %s)", o->dflt);
}

static void option_row(writer *w, const char *left, const char *help, int col) {
    indent_to(w, 2);
    words(w, left, 4);
    if (w->col + 2 > col) newline(w);
    indent_to(w, col);
    words(w, help, col);
    newline(w);
}

static void options(writer *w, const cli_command *c) {
    char left[160], help[2048];
    int widest = 10; /* "-h, --help" */
    for (int i = 0; i < c->n_options; i++) {
        int n = option_left(&c->options[i], left, sizeof left);
        if (n > widest) widest = n;
    }
    int cap = w->width * 2 / 5 - 4, col = 2 + (widest < cap ? widest : cap) + 2;
    if (c->n_options == 0 || !c->options[0].group) fprintf(w->f, "options:\n");
    for (int i = 0; i < c->n_options; i++) {
        const cli_option *o = &c->options[i];
        if (o->group) {
            if (i) newline(w);
            snprintf(help, sizeof help, "%s:", o->group);
            words(w, help, 2);
            newline(w);
        }
        option_left(o, left, sizeof left);
        option_help(o, help, sizeof help);
        option_row(w, left, help, col);
    }
    option_row(w, "-h, --help", "show this help", col);
}

static void usage(writer *w, const cli_command *c) {
    char prefix[64];
    const char *s = c->usage ? c->usage : "";
    for (int first = 1; first || *s; first = 0) {
        size_t n = strcspn(s, "\n");
        int at = snprintf(prefix, sizeof prefix, "%s graft%s%s%s", first ? "usage:" : "      ",
                          c->name ? " " : "", c->name ? c->name : "", n ? " " : "");
        char *line = strndup(s, n);
        if (!line) return;
        put(w, prefix, strlen(prefix));
        words(w, line, at);
        newline(w);
        free(line);
        s += n + (s[n] == '\n');
    }
}

void cli_help(const cli_command *c, FILE *f) {
    writer w = {f, cli_help_width(), 0, NULL};
    usage(&w, c);
    if (c->about) newline(&w), text(&w, c->about, 0);
    newline(&w);
    options(&w, c);
    if (c->examples) {
        fprintf(f, "\nexamples:\n");
        for (const char *s = c->examples; *s;) {
            size_t n = strcspn(s, "\n");
            char *line = strndup(s, n);
            if (!line) return;
            if (strncmp(line, "# ", 2) == 0) {
                w.margin = "  # ";
                put(&w, w.margin, 4);
                words(&w, line + 2, 4);
                newline(&w);
                w.margin = NULL;
            } else {
                command_line(&w, c, line);
            }
            free(line);
            s += n + (s[n] == '\n');
        }
    }
    if (c->writes) fprintf(f, "\nwrites:\n"), text(&w, c->writes, 2);
    fprintf(f, "\nexit status:\n");
    text(&w,
         c->exit_status ? c->exit_status
                        : "0 on success, 1 when the work fails, 2 for bad usage (an unknown "
                          "option, a bad value, a missing file).",
         2);
}
