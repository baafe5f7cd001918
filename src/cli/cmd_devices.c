/* cmd_devices.c: `graft devices`: the CPU graft runs on (model, features, threads) and GPUs. */
#include <dirent.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_args.h"
#include "cli_util.h"
#include "commands.h"

#define CMD "devices"

static const cli_option devices_options[] = {
    {"json", NULL, NULL, NULL, NULL,
     "one JSON object: cpu {model, features, cores_online, cores_available, threads}, "
     "cuda_built, gpu_usable, gpu_note, gpus [{device, name, compute_capability, "
     "multiprocessors, memory_total_bytes, memory_free_bytes, driver, cuda_runtime, cudnn, "
     "cublaslt}], driver_gpus [{name, bus}]"},
};

static const cli_command devices_command = {
    .name = "devices",
    .usage = "[--json]",
    .about = "Says what graft can compute on here: the CPU's model name, the instruction-set "
             "features its kernels use (avx2, fma, avx512f, avx512_bf16, avx512_fp16, amx_bf16, "
             "amx_tile), the number of cores online and available to this process, and the "
             "thread count graft will use (OMP_NUM_THREADS when set, else every available "
             "core). Then the GPUs graft can use (cuda:N): name, memory (free of total), "
             "compute capability, multiprocessors, and the driver, CUDA runtime, cuDNN and "
             "cuBLASLt versions. Without one it says why (a build without CUDA, no driver, no "
             "device) and names any NVIDIA GPU the kernel driver reports "
             "(/proc/driver/nvidia/gpus).",
    .options = devices_options,
    .n_options = CLI_COUNT(devices_options),
    .examples = "graft devices\ngraft devices --json > devices.json",
    .writes = "The report on stdout (text, or JSON with --json); no files.",
    .exit_status = "0, or 2 for bad usage.",
};

static const char *const FEATURES[] = {"avx2",        "fma",      "avx512f", "avx512_bf16",
                                       "avx512_fp16", "amx_bf16", "amx_tile"};
#define N_FEATURES ((int)(sizeof FEATURES / sizeof *FEATURES))
#define MAX_GPUS 16

typedef struct {
    char model[256];
    int has[N_FEATURES];
    long online, available, threads;
    char gpu_name[MAX_GPUS][128], gpu_bus[MAX_GPUS][64];
    int n_gpus; /* seen by the kernel driver */
    graft_gpu_info usable[MAX_GPUS];
    int n_usable;
    char why[256];
} devices;

static void trim_newline(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = '\0';
}

/* Does the space-separated flag list hold word? */
static int has_word(const char *list, const char *word) {
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += n)
        if ((p == list || p[-1] == ' ' || p[-1] == '\t') && (p[n] == ' ' || p[n] == '\n' || !p[n]))
            return 1;
    return 0;
}

static void read_cpuinfo(devices *d) {
    snprintf(d->model, sizeof d->model, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[8192];
    int got_model = 0, got_flags = 0;
    while ((!got_model || !got_flags) && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon) continue;
        const char *value = colon + 1 + (colon[1] == ' ');
        if (!got_model && strncmp(line, "model name", 10) == 0) {
            snprintf(d->model, sizeof d->model, "%s", value);
            trim_newline(d->model);
            got_model = 1;
        } else if (!got_flags && strncmp(line, "flags", 5) == 0) {
            for (int i = 0; i < N_FEATURES; i++) d->has[i] = has_word(value, FEATURES[i]);
            got_flags = 1;
        }
    }
    fclose(f);
}

static void read_threads(devices *d) {
    d->online = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    d->available = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : d->online;
    d->threads = d->available;
    const char *env = getenv("OMP_NUM_THREADS");
    char *end;
    long n = env ? strtol(env, &end, 10) : 0;
    if (env && end != env && n > 0) d->threads = n;
}

/* NVIDIA GPUs the kernel driver knows, from /proc/driver/nvidia/gpus/<bus>/information. */
static void read_gpus(devices *d) {
    DIR *dir = opendir("/proc/driver/nvidia/gpus");
    if (!dir) return;
    struct dirent *e;
    while (d->n_gpus < MAX_GPUS && (e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[512], line[256];
        snprintf(path, sizeof path, "/proc/driver/nvidia/gpus/%s/information", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        int i = d->n_gpus++;
        snprintf(d->gpu_bus[i], sizeof d->gpu_bus[i], "%.63s", e->d_name);
        snprintf(d->gpu_name[i], sizeof d->gpu_name[i], "NVIDIA GPU");
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "Model:", 6) == 0) {
                const char *v = line + 6;
                while (*v == ' ' || *v == '\t') v++;
                snprintf(d->gpu_name[i], sizeof d->gpu_name[i], "%.127s", v);
                trim_newline(d->gpu_name[i]);
            }
        fclose(f);
    }
    closedir(dir);
}

static void read_usable(devices *d) {
    d->n_usable = graft_gpu_count(d->why, sizeof d->why);
    if (d->n_usable > MAX_GPUS) d->n_usable = MAX_GPUS;
    for (int i = 0; i < d->n_usable; i++)
        if (graft_gpu_info_get(i, &d->usable[i]) != GRAFT_OK) d->n_usable = i;
}

/* 13000 -> "13.0"; cuDNN 91400 -> "9.14.0". */
static const char *cuda_version(int v, char *buf, size_t n) {
    snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
    return buf;
}
static const char *cudnn_version(size_t v, char *buf, size_t n) {
    snprintf(buf, n, "%zu.%zu.%zu", v / 10000, (v % 10000) / 100, v % 100);
    return buf;
}

static void print_gpus_text(const devices *d) {
    printf("\ngpu\n");
    if (d->n_usable == 0) printf("  no usable GPU: %s\n", d->why);
    for (int i = 0; i < d->n_usable; i++) {
        const graft_gpu_info *g = &d->usable[i];
        char a[32], b[32], c[32];
        printf("  cuda:%d     %s\n", g->index, g->name);
        printf("    memory   %.1f GiB free of %.1f GiB\n", g->free_bytes / 1073741824.0,
               g->total_bytes / 1073741824.0);
        printf("    compute  %d.%d, %d multiprocessors\n", g->cc_major, g->cc_minor,
               g->multiprocessors);
        printf("    driver   CUDA %s; runtime %s; cuDNN %s; cuBLASLt %zu\n",
               cuda_version(g->driver_version, a, sizeof a),
               cuda_version(g->runtime_version, b, sizeof b),
               cudnn_version(g->cudnn_version, c, sizeof c), g->cublaslt_version);
    }
    if (d->n_usable == 0)
        for (int i = 0; i < d->n_gpus; i++)
            printf("  the driver reports %s (%s)\n", d->gpu_name[i], d->gpu_bus[i]);
}

static void print_text(const devices *d) {
    printf("graft %s\n\ncpu\n  model      %s\n  features  ", graft_version(), d->model);
    int any = 0;
    for (int i = 0; i < N_FEATURES; i++)
        if (d->has[i]) printf(" %s", FEATURES[i]), any = 1;
    printf("%s\n  missing   ", any ? "" : " (none of the ones graft uses)");
    any = 0;
    for (int i = 0; i < N_FEATURES; i++)
        if (!d->has[i]) printf(" %s", FEATURES[i]), any = 1;
    printf("%s\n", any ? "" : " (none)");
    printf("  cores      %ld online, %ld available to graft\n", d->online, d->available);
    printf("  threads    %ld%s\n", d->threads,
           getenv("OMP_NUM_THREADS") ? " (OMP_NUM_THREADS)" : "");
    print_gpus_text(d);
}

static void print_gpus_json(const devices *d) {
    printf(", \"cuda_built\": %s, \"gpu_usable\": %s, \"gpu_note\": ",
           graft_cuda_built() ? "true" : "false", d->n_usable ? "true" : "false");
    cli_json_string(stdout, d->n_usable ? "" : d->why);
    printf(", \"gpus\": [");
    for (int i = 0; i < d->n_usable; i++) {
        const graft_gpu_info *g = &d->usable[i];
        char a[32], b[32], c[32];
        printf("%s{\"device\": \"cuda:%d\", \"name\": ", i ? ", " : "", g->index);
        cli_json_string(stdout, g->name);
        printf(", \"compute_capability\": \"%d.%d\", \"multiprocessors\": %d, "
               "\"memory_total_bytes\": %zu, \"memory_free_bytes\": %zu, \"driver\": \"%s\", "
               "\"cuda_runtime\": \"%s\", \"cudnn\": \"%s\", \"cublaslt\": %zu}",
               g->cc_major, g->cc_minor, g->multiprocessors, g->total_bytes, g->free_bytes,
               cuda_version(g->driver_version, a, sizeof a),
               cuda_version(g->runtime_version, b, sizeof b),
               cudnn_version(g->cudnn_version, c, sizeof c), g->cublaslt_version);
    }
    printf("], \"driver_gpus\": [");
    for (int i = 0; i < d->n_gpus; i++) {
        printf("%s{\"name\": ", i ? ", " : "");
        cli_json_string(stdout, d->gpu_name[i]);
        printf(", \"bus\": ");
        cli_json_string(stdout, d->gpu_bus[i]);
        printf("}");
    }
    printf("]");
}

static void print_json(const devices *d) {
    printf("{\"graft_version\": ");
    cli_json_string(stdout, graft_version());
    printf(", \"cpu\": {\"model\": ");
    cli_json_string(stdout, d->model);
    printf(", \"features\": {");
    for (int i = 0; i < N_FEATURES; i++)
        printf("%s\"%s\": %s", i ? ", " : "", FEATURES[i], d->has[i] ? "true" : "false");
    printf("}, \"cores_online\": %ld, \"cores_available\": %ld, \"threads\": %ld}", d->online,
           d->available, d->threads);
    print_gpus_json(d);
    printf("}\n");
}

int cmd_devices(int argc, char **argv) {
    int json = 0, k;
    const cli_option *o;
    const char *v;
    cli_parser p;
    cli_parser_init(&p, &devices_command, NULL, argc, argv);
    while ((k = cli_next(&p, &o, &v)) > 0) {
        if (k == CLI_POSITIONAL)
            return cli_error(CMD, "unexpected argument '%s' (graft devices takes none)", v);
        json = 1; /* --json, the only option */
    }
    if (k < 0) return cli_stop_status(k);
    devices d;
    memset(&d, 0, sizeof d);
    read_cpuinfo(&d);
    read_threads(&d);
    read_gpus(&d);
    read_usable(&d);
    if (json)
        print_json(&d);
    else
        print_text(&d);
    return 0;
}
