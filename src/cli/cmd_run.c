/* cmd_run.c: `graft run MODEL --input NAME=FILE.npy ... --output-dir DIR`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_args.h"
#include "cli_util.h"
#include "commands.h"
#include "graft.h"
#include "npy.h"

#define MAX_INPUTS 64

static int usage_error(const char *msg, const char *arg) {
    fprintf(stderr, "graft run: %s%s%s\n", msg, arg ? " " : "", arg ? arg : "");
    return 2;
}

/* An output's file name: the name with / : \\ as _, and a name too long for a file system (over
 * 200 bytes) cut to 183 bytes and ended with ~ and a 64-bit FNV-1a hash of the whole name, so
 * that outputs never share a file. */
static void file_name_of(const char *output, char *out, size_t size) {
    snprintf(out, size, "%s", output);
    if (strlen(output) > 200) {
        uint64_t h = 0xcbf29ce484222325ull;
        for (const unsigned char *c = (const unsigned char *)output; *c; c++)
            h = (h ^ *c) * 0x100000001b3ull;
        snprintf(out + 183, size - 183, "~%016llx", (unsigned long long)h);
    }
    for (char *c = out; *c; c++)
        if (*c == '/' || *c == ':' || *c == '\\') *c = '_';
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
        char path[4096], err[512], name[256];
        file_name_of(info.name, name, sizeof name);
        snprintf(path, sizeof path, "%s/%s.npy", dir, name);
        if (npy_write(path, t, err, sizeof err) != 0) {
            fprintf(stderr, "graft run: %s\n", err);
            return 1;
        }
    }
    return 0;
}

static const char *const precisions[] = {"fp32", "fp16", "bf16", NULL};

static const cli_option run_options[] = {
    {"input", "NAME=FILE.npy", NULL, NULL, NULL,
     "the value of input NAME, a .npy array of its dtype and shape (once per input)"},
    {"output-dir", "DIR", NULL, NULL, NULL, "the folder the outputs go to (required; created)"},
    {"device", "D", "cpu", NULL, NULL, "cpu, auto (a GPU when usable), cuda or cuda:N"},
    {"precision", "P", "fp32", precisions, NULL, "fp16 and bf16 are for a GPU"},
    {"uint8", NULL, NULL, NULL, NULL,
     "the image input takes uint8 NHWC pixels (N, H, W, C), normalised inside the model (the "
     "mean and std of its metadata, else ImageNet's)"},
};

static const cli_command run_command = {
    .name = "run",
    .usage = "MODEL --input NAME=FILE.npy ... --output-dir DIR [options]",
    .about = "Runs MODEL once on the given inputs (every input of the model, each a NumPy .npy "
             "file) and saves each of its outputs.",
    .options = run_options,
    .n_options = CLI_COUNT(run_options),
    .examples = "# x.npy: a float32 array of shape (1, 1, 8, 8), e.g. saved with numpy.save:\n"
                "graft run models/digits_cnn.onnx --input input=x.npy --output-dir out\n"
                "graft run bert.onnx --input input_ids=ids.npy --input attention_mask=mask.npy "
                "--output-dir out --device=cuda:0 --precision=fp16",
    .writes = "DIR/<output name>.npy for each output of the model (characters / : \\ in the "
              "name become _; a name over 200 bytes is cut to 183 and ends in ~ and 16 hex digits "
              "of its hash); nothing on stdout.",
    .exit_status = "0 on success, 1 when an input cannot be read or the model fails, 2 for bad "
                   "usage.",
};

/* The option o with value v; 0, or 2 after printing the error. */
static int run_option(const cli_option *o, const char *v, const char **out_dir, char **names,
                      int *n_inputs, char *device, graft_dtype *precision, int *uint8) {
    if (!strcmp(o->name, "uint8")) return *uint8 = 1, 0;
    if (!strcmp(o->name, "device")) return cli_device("run", v, device, 32);
    if (!strcmp(o->name, "precision")) return cli_precision("run", v, precision);
    if (!strcmp(o->name, "output-dir")) return *out_dir = v, 0;
    if (!strchr(v, '=')) return usage_error("--input needs NAME=FILE.npy, got", v);
    if (*n_inputs == MAX_INPUTS) return usage_error("too many inputs", NULL);
    names[(*n_inputs)++] = (char *)v;
    return 0;
}

int cmd_run(int argc, char **argv) {
    const char *path = NULL, *out_dir = NULL, *v;
    const cli_option *o;
    graft_named_tensor inputs[MAX_INPUTS];
    char *names[MAX_INPUTS];
    int n_inputs = 0, rc = 1, k, uint8 = 0;
    char device[32] = "cpu";
    graft_dtype precision = GRAFT_DTYPE_F32;
    cli_parser p;
    cli_parser_init(&p, &run_command, NULL, argc, argv);
    while ((k = cli_next(&p, &o, &v)) > 0) {
        if (k == CLI_OPTION) {
            if (run_option(o, v, &out_dir, names, &n_inputs, device, &precision, &uint8)) return 2;
        } else if (!path)
            path = v;
        else
            return usage_error("more than one model given:", v);
    }
    if (k < 0) return cli_stop_status(k);
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
    if (graft_model_load(ctx, path, &m) != GRAFT_OK)
        fprintf(stderr, "graft run: %s\n", graft_last_error(ctx));
    else if (uint8 && cli_uint8_input("run", ctx, m))
        ; /* the error is printed */
    else if (graft_model_set_precision(m, precision) != GRAFT_OK ||
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
