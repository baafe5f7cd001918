/* main.c: the graft command-line tool: dispatches to one subcommand per file; `graft help CMD`
 * is `graft CMD --help`. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli_args.h"
#include "commands.h"
#include "graft.h"

static const cli_command version_command = {
    .name = "version",
    .usage = "",
    .about = "Prints graft's version.",
    .examples = "graft version",
    .writes = "One line on stdout: \"graft VERSION\".",
    .exit_status = "0, or 2 for bad usage.",
};

static int cmd_version(int argc, char **argv) {
    cli_parser p;
    const cli_option *o;
    const char *v;
    cli_parser_init(&p, &version_command, NULL, argc, argv);
    int k = cli_next(&p, &o, &v);
    if (k == CLI_POSITIONAL)
        return fprintf(stderr, "graft version: unexpected argument '%s'\n", v), 2;
    if (k != CLI_DONE) return cli_stop_status(k);
    printf("graft %s\n", graft_version());
    return 0;
}

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"info", cmd_info},       {"run", cmd_run},         {"finetune", cmd_finetune},
    {"export", cmd_export},   {"prune", cmd_prune},     {"tokenize", cmd_tokenize},
    {"predict", cmd_predict}, {"eval", cmd_eval},       {"devices", cmd_devices},
    {"bench", cmd_bench},     {"version", cmd_version},
};

static const cli_option tool_options[] = {
    {"version", NULL, NULL, NULL, NULL, "print the version"},
};

static const cli_command tool = {
    .name = NULL,
    .usage = "COMMAND [options]\nhelp COMMAND",
    .about =
        "graft grafts a new head onto a pretrained ONNX backbone, trains it, prunes and exports "
        "it.\n\n"
        "commands:\n"
        "  info  a model's inputs, outputs, opsets, ops, parameters, FLOPs, and the cut point "
        "`auto` would pick\n"
        "  finetune  graft a new head onto a model, train it on labelled data, export the "
        "result\n"
        "  export  rebuild the grafted model of a finetune run from its checkpoint\n"
        "  prune  prune a model (magnitude, channels, heads, 2:4), export it, report sizes and "
        "speed\n"
        "  run  run a model on .npy inputs, write its outputs as .npy files\n"
        "  tokenize  BERT WordPiece token ids of each line, as JSON lines\n"
        "  predict  the top classes of each image through an exported model\n"
        "  eval  accuracy, per-class metrics and the confusion matrix on a labelled folder\n"
        "  devices  CPU features and threads; the GPUs graft can use\n"
        "  bench  latency and throughput per batch size\n"
        "  version  print the version\n"
        "  help  `graft help COMMAND` describes a command (as `graft COMMAND --help` does)\n\n"
        "Options are written --option value or --option=value; -h and --help work everywhere. "
        "Help is wrapped to the terminal's width (else $COLUMNS, else 80 columns).",
    .options = tool_options,
    .n_options = CLI_COUNT(tool_options),
    .examples = "graft help finetune\n"
                "graft info models/digits_cnn.onnx\n"
                "graft finetune --model models/digits_cnn.onnx --data examples/digits/train "
                "--out digits.onnx --resize=0 --crop=8 --grayscale",
    .writes = "This help on stdout (on stderr, with exit status 2, when no command is given).",
    .exit_status = "The command's: 0 on success, 1 when its work fails, 2 for bad usage.",
};

static int find_command(const char *name) {
    for (int i = 0; i < CLI_COUNT(commands); i++)
        if (strcmp(commands[i].name, name) == 0) return i;
    return -1;
}

static int unknown_command(const char *name) {
    const char *names[CLI_COUNT(commands) + 1];
    for (int i = 0; i < CLI_COUNT(commands); i++) names[i] = commands[i].name;
    names[CLI_COUNT(commands)] = "help";
    const char *near = cli_nearest(name, strlen(name), names, CLI_COUNT(commands) + 1);
    if (near)
        fprintf(stderr, "graft: unknown command '%s'; did you mean %s?\n", name, near);
    else
        fprintf(stderr, "graft: unknown command '%s' (see graft --help)\n", name);
    return 2;
}

/* `graft help [COMMAND]`: the tool's help, or exactly what `graft COMMAND --help` prints. */
static int help(int argc, char **argv) {
    if (argc < 2) return cli_help(&tool, stdout), 0;
    if (argc > 2) return fprintf(stderr, "graft help: one command at a time\n"), 2;
    if (strcmp(argv[1], "help") == 0) return cli_help(&tool, stdout), 0;
    int i = find_command(argv[1]);
    if (i < 0) return unknown_command(argv[1]);
    char *help_argv[] = {argv[1], "--help", NULL};
    return commands[i].run(2, help_argv);
}

int main(int argc, char **argv) {
    /* A file growing past the shell's size limit (ulimit -f) is then an error naming the file
     * (EFBIG from the write), not a kill by SIGXFSZ with nothing said. */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2) {
        cli_help(&tool, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    int i = find_command(cmd);
    if (i >= 0) return commands[i].run(argc - 1, argv + 1);
    if (strcmp(cmd, "help") == 0) return help(argc - 1, argv + 1);
    if (cmd[0] == '-') { /* the tool's own options: -h, --help, --version */
        cli_parser p;
        const cli_option *o;
        const char *v;
        cli_parser_init(&p, &tool, NULL, argc, argv);
        int k = cli_next(&p, &o, &v);
        if (k == CLI_POSITIONAL) return unknown_command(cmd); /* "-" */
        return k == CLI_OPTION ? cmd_version(1, argv + 1) : cli_stop_status(k);
    }
    return unknown_command(cmd);
}
