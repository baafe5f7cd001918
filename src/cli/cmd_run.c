/* cmd_run.c: `graft run MODEL --input NAME=FILE.npy ... --output-dir DIR`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_util.h"
#include "commands.h"
#include "graft.h"
#include "npy.h"

#define MAX_INPUTS 64

static int usage_error(const char *msg, const char *arg) {
    fprintf(stderr, "graft run: %s%s%s\n", msg, arg ? " " : "", arg ? arg : "");
    return 2;
}

static int write_outputs(graft_ctx *ctx, const graft_model *m, const char *dir) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "graft run: cannot create '%s': %s\n", dir, strerror(errno));
        return 1;
    }
    for (int i = 0; i < graft_model_output_count(m); i++) {
        graft_value_info info;
        const graft_tensor *t;
        graft_model_output_info(m, i, &info);
        if (graft_model_output(m, i, &t) != GRAFT_OK) {
            fprintf(stderr, "graft run: %s\n", graft_last_error(ctx));
            return 1;
        }
        char path[4096], err[512];
        char name[256];
        snprintf(name, sizeof name, "%s", info.name);
        for (char *c = name; *c; c++)
            if (*c == '/' || *c == ':' || *c == '\\') *c = '_';
        snprintf(path, sizeof path, "%s/%s.npy", dir, name);
        if (npy_write(path, t, err, sizeof err) != 0) {
            fprintf(stderr, "graft run: %s\n", err);
            return 1;
        }
    }
    return 0;
}

int cmd_run(int argc, char **argv) {
    const char *path = NULL, *out_dir = NULL;
    graft_named_tensor inputs[MAX_INPUTS];
    char *names[MAX_INPUTS];
    int n_inputs = 0, rc = 1;
    char device[32] = "cpu";
    graft_dtype precision = GRAFT_DTYPE_F32;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            printf("usage: graft run MODEL --input NAME=FILE.npy ... --output-dir DIR "
                   "[--device D]\n"
                   "Runs MODEL and writes each output as DIR/<output name>.npy.\n"
                   "  --device D      cpu (default), auto (a GPU when usable), cuda or cuda:N\n"
                   "  --precision P   fp32 (default); fp16 or bf16 on a GPU\n");
            return 0;
        } else if (strcmp(argv[i], "--device") == 0) {
            if (++i >= argc) return usage_error("--device needs cpu, auto, cuda or cuda:N", NULL);
            if (cli_device("run", argv[i], device, sizeof device)) return 2;
        } else if (strcmp(argv[i], "--precision") == 0) {
            if (++i >= argc) return usage_error("--precision needs fp32, fp16 or bf16", NULL);
            if (cli_precision("run", argv[i], &precision)) return 2;
        } else if (strcmp(argv[i], "--output-dir") == 0) {
            if (++i >= argc) return usage_error("--output-dir needs a folder", NULL);
            out_dir = argv[i];
        } else if (strcmp(argv[i], "--input") == 0) {
            if (++i >= argc || !strchr(argv[i], '='))
                return usage_error("--input needs NAME=FILE.npy", NULL);
            if (n_inputs == MAX_INPUTS) return usage_error("too many inputs", NULL);
            names[n_inputs] = argv[i];
            n_inputs++;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return usage_error("unknown option", argv[i]);
        } else if (!path)
            path = argv[i];
        else
            return usage_error("more than one model given:", argv[i]);
    }
    if (!path)
        return usage_error("no model given (usage: graft run MODEL --input NAME=FILE.npy "
                           "... --output-dir DIR)",
                           NULL);
    if (!out_dir) return usage_error("no --output-dir given", NULL);
    int loaded = 0;
    for (; loaded < n_inputs; loaded++) {
        char *eq = strchr(names[loaded], '=');
        *eq = '\0';
        inputs[loaded].name = names[loaded];
        char err[512];
        if (npy_read(eq + 1, &inputs[loaded].tensor, err, sizeof err) != 0) {
            fprintf(stderr, "graft run: input '%s': %s\n", names[loaded], err);
            goto done;
        }
    }
    graft_ctx *ctx = cli_ctx("run", 0, device);
    if (!ctx) goto done;
    graft_model *m = NULL;
    if (graft_model_load(ctx, path, &m) != GRAFT_OK ||
        graft_model_set_precision(m, precision) != GRAFT_OK ||
        graft_model_run(m, inputs, n_inputs) != GRAFT_OK)
        fprintf(stderr, "graft run: %s\n", graft_last_error(ctx));
    else
        rc = write_outputs(ctx, m, out_dir);
    graft_model_free(m);
    graft_ctx_free(ctx);
done:
    for (int i = 0; i < loaded; i++) free(inputs[i].tensor.data);
    return rc;
}
