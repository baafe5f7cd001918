/* cmd_info.c: `graft info MODEL [--json]`: what a model takes, gives, uses and costs. */
#include <stdio.h>
#include <string.h>

#include "cli_args.h"
#include "commands.h"
#include "graft.h"
#include "image_prep.h"

static void print_json_string(const char *s) {
    putchar('"');
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static const char *pooling_name(graft_pooling p) {
    static const char *const names[] = {"auto", "none", "cls", "pooler", "mean", "spatial"};
    return (unsigned)p < sizeof names / sizeof *names ? names[p] : "?";
}

static void print_dims(const graft_value_info *v, int json) {
    printf(json ? "[" : "(");
    for (int d = 0; d < v->ndim; d++) {
        if (d) printf(", ");
        if (v->dims[d] >= 0)
            printf("%lld", (long long)v->dims[d]);
        else if (json)
            print_json_string(v->dim_names[d] ? v->dim_names[d] : "?");
        else
            printf("%s", v->dim_names[d] ? v->dim_names[d] : "?");
    }
    printf(json ? "]" : ")");
}

static void print_values(const graft_model *m, int outputs, int json) {
    int n = outputs ? graft_model_output_count(m) : graft_model_input_count(m);
    for (int i = 0; i < n; i++) {
        graft_value_info v;
        if (outputs)
            graft_model_output_info(m, i, &v);
        else
            graft_model_input_info(m, i, &v);
        if (json) {
            printf("%s{\"name\": ", i ? ", " : "");
            print_json_string(v.name);
            printf(", \"dtype\": \"%s\", \"shape\": ", graft_dtype_name(v.dtype));
            print_dims(&v, 1);
            printf("}");
        } else {
            printf("  %-24s %-8s ", v.name, graft_dtype_name(v.dtype));
            print_dims(&v, 0);
            printf("\n");
        }
    }
}

/* Whether the model takes images (a 4-d first input): their preprocessing is worth showing. */
static int takes_images(const graft_model *m) {
    graft_value_info v;
    return graft_model_input_count(m) > 0 && graft_model_input_info(m, 0, &v) == GRAFT_OK &&
           v.ndim == 4;
}

/* What `graft predict`, `eval` and `finetune` (without options) would use, and why. */
static void print_preprocessing(graft_ctx *ctx, const graft_model *m, int json) {
    image_prep p;
    int ok = takes_images(m) && image_prep_resolve(&p, ctx, m, NULL, NULL) == 0;
    if (json) {
        printf(", \"preprocessing\": ");
        if (ok)
            image_prep_json(stdout, &p);
        else
            printf("null");
    } else if (ok) {
        image_prep_print(stdout, &p);
    } else if (takes_images(m)) {
        printf("preprocessing none: %s\n", p.error);
    }
}

/* A parameter count as people say it: 8.4 M, 36.8 k, 64. */
static void print_count(int64_t n) {
    if (n >= 1000000)
        printf("%.1f M", (double)n / 1e6);
    else if (n >= 1000)
        printf("%.1f k", (double)n / 1e3);
    else
        printf("%lld", (long long)n);
}

/* The freeze points before the auto cut: what each --unfreeze N takes (or, with no stages or
 * layers recognised, every candidate for --train-from). */
static void print_freeze_text(graft_ctx *ctx, const graft_model *m) {
    int n = graft_model_freeze_point_count(m), units = 0;
    if (n < 0) {
        printf("freeze      none: %s\n", graft_last_error(ctx));
        return;
    }
    const char *kind = NULL, *t;
    graft_model_unfreeze_point(m, 1, &t, &units, &kind);
    if (units > 0)
        printf("freeze      %d %ss before the cut (--unfreeze 1..%d); %d candidate tensors for "
               "--train-from (--json lists them)\n",
               units, kind, units, n);
    else
        printf("freeze      no stages or layers recognised (--unfreeze not available); %d "
               "candidate tensors for --train-from:\n",
               n);
    for (int i = 0; i < n; i++) {
        graft_freeze_point_info p;
        if (graft_model_freeze_point(m, i, &p) != GRAFT_OK || (units > 0 && p.unit == 0)) continue;
        if (units > 0)
            printf("  --unfreeze %-2d '%s' (the last %d %s%s from node '%s': ", p.unit, p.tensor,
                   p.unit, p.kind, p.unit > 1 ? "s" : "", p.first_node);
        else
            printf("  '%s' (%s, then node '%s': ", p.tensor, p.kind, p.first_node);
        print_count(p.trainable_parameters);
        printf(" trainable parameters)\n");
    }
}

static void print_freeze_json(graft_ctx *ctx, const graft_model *m) {
    int n = graft_model_freeze_point_count(m), units = 0;
    if (n < 0) {
        printf(", \"freeze_points\": null, \"freeze_points_why\": ");
        print_json_string(graft_last_error(ctx));
        printf(", \"freeze_units\": 0, \"freeze_unit_kind\": null");
        return;
    }
    printf(", \"freeze_points\": [");
    for (int i = 0; i < n; i++) {
        graft_freeze_point_info p;
        if (graft_model_freeze_point(m, i, &p) != GRAFT_OK) continue;
        printf("%s{\"tensor\": ", i ? ", " : "");
        print_json_string(p.tensor);
        printf(", \"kind\": \"%s\", \"unfreeze\": ", p.kind);
        if (p.unit > 0)
            printf("%d", p.unit);
        else
            printf("null");
        printf(", \"first_node\": ");
        print_json_string(p.first_node);
        printf(", \"trainable_parameters\": %lld}", (long long)p.trainable_parameters);
    }
    const char *kind = NULL, *t;
    graft_model_unfreeze_point(m, 1, &t, &units, &kind);
    printf("], \"freeze_units\": %d, \"freeze_unit_kind\": ", units);
    if (kind)
        printf("\"%s\"", kind);
    else
        printf("null");
}

static void print_text(graft_ctx *ctx, const graft_model *m, const char *path,
                       const graft_model_summary *s) {
    printf("model       %s\n", path);
    printf("producer    %s %s (IR version %lld)\n", s->producer_name, s->producer_version,
           (long long)s->ir_version);
    printf("opsets     ");
    for (int i = 0; i < graft_model_opset_count(m); i++) {
        const char *d;
        int64_t v;
        graft_model_opset(m, i, &d, &v);
        printf(" %s %lld", d, (long long)v);
    }
    printf("\ninputs\n");
    print_values(m, 0, 0);
    printf("outputs\n");
    print_values(m, 1, 0);
    const char *batch_why;
    graft_model_fixed_batch(m, &batch_why);
    if (batch_why[0]) printf("batch       %s\n", batch_why);
    printf("nodes       %lld\n", (long long)s->node_count);
    printf("ops        ");
    for (int i = 0; i < graft_model_op_type_count(m); i++) {
        const char *op;
        int64_t c;
        graft_model_op_type(m, i, &op, &c);
        printf(" %s:%lld", op, (long long)c);
    }
    printf("\nparameters  %lld (%.1f MB)\n", (long long)s->parameter_count,
           (double)s->parameter_bytes / 1e6);
    if (s->flops_per_sample >= 0)
        printf("FLOPs       %.3g per sample (symbolic dims: batch 1, others %lld)\n",
               s->flops_per_sample, (long long)s->assumed_seq_len);
    else
        printf("FLOPs       unknown\n");
    graft_auto_cut_info cut;
    if (graft_model_auto_cut_info(m, &cut) == GRAFT_OK) {
        printf("auto cut    %s (pooling %s, ", cut.tensor, pooling_name(cut.pooling));
        if (cut.features >= 0)
            printf("%lld features)\n", (long long)cut.features);
        else
            printf("feature size not known at load)\n");
        printf("  why       %s\n", cut.why);
    } else {
        printf("auto cut    none: %s\n", graft_last_error(ctx));
    }
    print_freeze_text(ctx, m);
    for (int i = 0; i < graft_model_metadata_count(m); i++) {
        const char *k, *v;
        graft_model_metadata(m, i, &k, &v);
        size_t len = strlen(v), lines = 0;
        for (const char *p = v; (p = strchr(p, '\n')) != NULL; p++) lines++;
        if (lines || len > 300) /* a vocabulary or tokenizer.json: its size, not its text */
            printf("metadata    %s = (%zu lines, %zu bytes)\n", k,
                   lines + (len && v[len - 1] != '\n'), len);
        else
            printf("metadata    %s = %s\n", k, v);
    }
    print_preprocessing(ctx, m, 0);
}

static void print_json(graft_ctx *ctx, const graft_model *m, const char *path,
                       const graft_model_summary *s) {
    printf("{\"model\": ");
    print_json_string(path);
    printf(", \"producer\": ");
    print_json_string(s->producer_name);
    printf(", \"ir_version\": %lld, \"opsets\": {", (long long)s->ir_version);
    for (int i = 0; i < graft_model_opset_count(m); i++) {
        const char *d;
        int64_t v;
        graft_model_opset(m, i, &d, &v);
        printf("%s", i ? ", " : "");
        print_json_string(d);
        printf(": %lld", (long long)v);
    }
    printf("}, \"inputs\": [");
    print_values(m, 0, 1);
    printf("], \"outputs\": [");
    print_values(m, 1, 1);
    const char *batch_why;
    printf("], \"fixed_batch\": %lld, \"batch\": ",
           (long long)graft_model_fixed_batch(m, &batch_why));
    print_json_string(batch_why);
    printf(", \"nodes\": %lld, \"ops\": {", (long long)s->node_count);
    for (int i = 0; i < graft_model_op_type_count(m); i++) {
        const char *op;
        int64_t c;
        graft_model_op_type(m, i, &op, &c);
        printf("%s\"%s\": %lld", i ? ", " : "", op, (long long)c);
    }
    printf("}, \"parameters\": %lld, \"parameter_bytes\": %lld, \"flops_per_sample\": %.6g",
           (long long)s->parameter_count, (long long)s->parameter_bytes, s->flops_per_sample);
    graft_auto_cut_info cut;
    int found = graft_model_auto_cut_info(m, &cut) == GRAFT_OK;
    printf(", \"auto_cut\": ");
    if (found) {
        print_json_string(cut.tensor);
        printf(", \"auto_cut_why\": ");
        print_json_string(cut.why);
        printf(", \"auto_cut_pooling\": \"%s\", \"auto_cut_features\": ",
               pooling_name(cut.pooling));
        if (cut.features >= 0)
            printf("%lld", (long long)cut.features);
        else
            printf("null");
    } else {
        printf("null, \"auto_cut_why\": ");
        print_json_string(graft_last_error(ctx));
        printf(", \"auto_cut_pooling\": null, \"auto_cut_features\": null");
    }
    print_freeze_json(ctx, m);
    printf(", \"metadata\": {");
    for (int i = 0; i < graft_model_metadata_count(m); i++) {
        const char *k, *v;
        graft_model_metadata(m, i, &k, &v);
        printf("%s", i ? ", " : "");
        print_json_string(k);
        printf(": ");
        print_json_string(v);
    }
    printf("}");
    print_preprocessing(ctx, m, 1);
    printf("}\n");
}

static const cli_option info_options[] = {
    {"json", NULL, NULL, NULL, NULL,
     "one JSON object instead of text: model, producer, ir_version, opsets, inputs and outputs "
     "[{name, dtype, shape}], fixed_batch (0: any), batch (why), nodes, ops, parameters, "
     "parameter_bytes, flops_per_sample, auto_cut (the tensor; null when none), auto_cut_why, "
     "auto_cut_pooling (none, cls or spatial), auto_cut_features (per sample; null when not "
     "known), freeze_points (the candidate freeze points before the auto cut, nearest it first: "
     "[{tensor, kind (stage, layer, block or tensor), unfreeze (the N of --unfreeze N that picks "
     "it, else null), first_node, trainable_parameters}]; null, with freeze_points_why, when "
     "none), freeze_units (stages or layers; 0 when none are recognised), freeze_unit_kind "
     "(stage, layer or null), metadata"},
};

static const cli_command info_command = {
    .name = "info",
    .usage = "MODEL [--json]",
    .about = "Describes an ONNX model: its inputs and outputs (symbolic dimensions by name), "
             "the batch its graph fixes (larger batches then run in chunks), "
             "opsets, producer, the count of each op type, parameters, FLOPs per sample, the "
             "cut point `graft finetune --cut auto` would pick (the tensor, the pooling the cut "
             "adds, the "
             "feature size and why), the freeze points before that cut (the tensors every path "
             "to it passes through; what `--unfreeze N` takes: the input of the last N stages of "
             "a CNN or layers of an encoder), and its metadata "
             "(an exported model's class names and preprocessing).",
    .options = info_options,
    .n_options = CLI_COUNT(info_options),
    .examples = "graft info models/digits_cnn.onnx\n"
                "graft info --json models/digits_cnn.onnx > info.json",
    .writes = "The description on stdout; no files.",
    .exit_status = "0 on success, 1 when the model cannot be loaded, 2 for bad usage.",
};

int cmd_info(int argc, char **argv) {
    const char *path = NULL, *v;
    const cli_option *o;
    int json = 0, k;
    cli_parser p;
    cli_parser_init(&p, &info_command, NULL, argc, argv);
    while ((k = cli_next(&p, &o, &v)) > 0) {
        if (k == CLI_OPTION)
            json = 1; /* --json, the only option */
        else if (!path)
            path = v;
        else
            return fprintf(stderr, "graft info: more than one model given ('%s')\n", v), 2;
    }
    if (k < 0) return cli_stop_status(k);
    if (!path) {
        fprintf(stderr, "graft info: no model given (usage: graft info MODEL [--json])\n");
        return 2;
    }
    graft_ctx *ctx;
    if (graft_ctx_create(NULL, &ctx) != GRAFT_OK) return 1;
    graft_model *m;
    if (graft_model_load(ctx, path, &m) != GRAFT_OK) {
        fprintf(stderr, "graft info: %s\n", graft_last_error(ctx));
        graft_ctx_free(ctx);
        return 1;
    }
    graft_model_summary s;
    graft_model_summarize(m, &s);
    if (json)
        print_json(ctx, m, path, &s);
    else
        print_text(ctx, m, path, &s);
    graft_model_free(m);
    graft_ctx_free(ctx);
    return 0;
}
