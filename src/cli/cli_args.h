/* cli_args.h: the graft tool's shared option layer: one table per command, a parser (--opt value,
 * --opt=value, -h/--help, "did you mean" for a misspelled option, the choices of a bad value)
 * and a help printer that groups options by topic and wraps to the terminal's width. */
#ifndef GRAFT_CLI_ARGS_H
#define GRAFT_CLI_ARGS_H

#include <stddef.h>
#include <stdio.h>

typedef struct cli_option {
    const char *name;           /* without the leading dashes */
    const char *value;          /* the value's placeholder in help ("N", "DIR"); NULL: a flag */
    const char *dflt;           /* shown as "(default X)"; NULL: none */
    const char *const *choices; /* NULL-terminated values the option accepts, or NULL: any */
    const char *group;          /* starts a topic heading in help; NULL: the previous one's */
    const char *help;
} cli_option;

/* A command's interface. The texts are paragraphs separated by blank lines; a paragraph whose
 * first line starts with two spaces is a list of "  TERM  DESCRIPTION" items (one per line that
 * starts with two spaces). examples: one command per line; a line starting with "# " is a
 * comment. Everything is wrapped to the width when printed. */
typedef struct cli_command {
    const char *name;  /* "finetune"; NULL for the tool itself */
    const char *usage; /* synopses after "graft NAME ", one per line */
    const char *about;
    const cli_option *options;
    int n_options;
    const char *examples;
    const char *writes;      /* what the command writes: stdout, files */
    const char *exit_status; /* NULL: 0 on success, 1 when the work fails, 2 for bad usage */
} cli_command;

#define CLI_COUNT(table) ((int)(sizeof(table) / sizeof((table)[0])))

/* The width help is wrapped to: the terminal's (when stdout is one), else $COLUMNS, else 80;
 * kept within [CLI_MIN_WIDTH, CLI_MAX_WIDTH] (long lines of prose are hard to read). */
#define CLI_MIN_WIDTH 40
#define CLI_MAX_WIDTH 100
int cli_help_width(void);

/* Print the command's help: usage, about, options by topic, examples, what it writes, exit
 * status. */
void cli_help(const cli_command *c, FILE *f);

enum { CLI_DONE = 0, CLI_OPTION = 1, CLI_POSITIONAL = 2, CLI_HELP = -1, CLI_ERROR = -2 };

typedef struct cli_parser {
    const cli_command *cmd;
    const char *label; /* messages read "graft LABEL: ..." */
    int argc, next;
    char **argv;
    int rest_positional; /* after "--" */
} cli_parser;

/* argv[0] is the command's name; label NULL means the command's name. */
void cli_parser_init(cli_parser *p, const cli_command *c, const char *label, int argc, char **argv);

/* The next argument. CLI_OPTION: *opt is the option, *value its value (NULL for a flag; a choice
 * option's value is one of its choices). CLI_POSITIONAL: *value is the argument. CLI_DONE at the
 * end. CLI_HELP after printing the help on stdout (-h, --help); CLI_ERROR after printing one
 * line on stderr (unknown option, missing value, a value for a flag, a bad choice). */
int cli_next(cli_parser *p, const cli_option **opt, const char **value);

/* The exit status for a parse that ended in CLI_HELP (0) or CLI_ERROR (2). */
int cli_stop_status(int k);

/* The option called name (no dashes; its first len characters), or NULL. */
const cli_option *cli_find(const cli_command *c, const char *name, size_t len);

/* Print "graft LABEL: unknown option --NAME; did you mean --X?" (or "(see graft CMD --help)"
 * when nothing is near); returns 2. */
int cli_unknown_option(const char *label, const cli_command *c, const char *name, size_t len);

/* Index of v among o's choices, or -1 after printing "--NAME V: expected one of A, B, C". */
int cli_choice(const char *label, const cli_option *o, const char *v);

/* The one of names[0..n) nearest to word (an edit away, or two for longer words; or the only
 * one word begins), or NULL. */
const char *cli_nearest(const char *word, size_t len, const char *const *names, int n);

#endif
