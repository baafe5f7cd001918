/* main.c: the graft command-line tool: dispatches to one subcommand per file. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "graft.h"

static void usage(FILE *f) {
    fprintf(f, "usage: graft <command> [options]\n"
               "\n"
               "commands:\n"
               "  info MODEL [--json]            inputs, outputs, opsets, ops, parameters, FLOPs,\n"
               "                                 and the cut point `auto` would pick\n"
               "  run MODEL --input NAME=FILE.npy ... --output-dir DIR\n"
               "                                 run the model, write DIR/<output name>.npy\n"
               "  tokenize --vocab VOCAB.txt [--cased] [--max-len N] [--pair] [FILE]\n"
               "                                 BERT token ids of each line, as JSON lines\n"
               "  version                        print the version\n"
               "\n"
               "`graft <command> --help` describes a command.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "info") == 0) return cmd_info(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0) return cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "tokenize") == 0) return cmd_tokenize(argc - 1, argv + 1);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("graft %s\n", graft_version());
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "graft: unknown command '%s' (try graft --help)\n", cmd);
    return 2;
}
