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
               "  finetune --model M.onnx --data DIR --out OUT.onnx [options]\n"
               "                                 graft a new head onto M, train it on DIR, export\n"
               "  export --checkpoint DIR [the finetune run's options]\n"
               "                                 rebuild the grafted model from a checkpoint\n"
               "  prune --model M.onnx --method magnitude|channels|heads|2:4 --out P.onnx\n"
               "                                 prune, export, report sizes and speed\n"
               "  run MODEL --input NAME=FILE.npy ... --output-dir DIR\n"
               "                                 run the model, write DIR/<output name>.npy\n"
               "  tokenize --vocab VOCAB.txt [--cased] [--max-len N] [--pair] [FILE]\n"
               "                                 BERT token ids of each line, as JSON lines\n"
               "  predict --model M.onnx [--top-k K] [--format text|csv|jsonl] FILE_OR_DIR...\n"
               "                                 the top classes of each image\n"
               "  eval --model M.onnx --data DIR [--json]\n"
               "                                 accuracy, per-class metrics and the confusion\n"
               "                                 matrix on a labelled image folder\n"
               "  devices [--json]               CPU features and threads; GPUs\n"
               "  bench MODEL [--batch 1,8,32] [--iters N]\n"
               "                                 latency and throughput per batch size\n"
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
    if (strcmp(cmd, "finetune") == 0) return cmd_finetune(argc - 1, argv + 1);
    if (strcmp(cmd, "export") == 0) return cmd_export(argc - 1, argv + 1);
    if (strcmp(cmd, "prune") == 0) return cmd_prune(argc - 1, argv + 1);
    if (strcmp(cmd, "tokenize") == 0) return cmd_tokenize(argc - 1, argv + 1);
    if (strcmp(cmd, "predict") == 0) return cmd_predict(argc - 1, argv + 1);
    if (strcmp(cmd, "eval") == 0) return cmd_eval(argc - 1, argv + 1);
    if (strcmp(cmd, "devices") == 0) return cmd_devices(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0) return cmd_bench(argc - 1, argv + 1);
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
