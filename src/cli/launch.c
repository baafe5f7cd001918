/* launch.c: `graft finetune --nproc N` re-launches itself under mpirun (found on the PATH), or
 * without it in a build with NCCL starts one rank per GPU itself, and reports how the ranks
 * ended; under a launcher, each rank joins the group and only rank 0
 * prints and writes files. */
#include "launch.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "graft_config.h"

/* The first executable NAME in $PATH into path (0), or -1. */
static int find_on_path(const char *name, char *path, size_t size) {
    const char *p = getenv("PATH");
    if (!p) return -1;
    while (*p) {
        size_t n = strcspn(p, ":");
        if (n && snprintf(path, size, "%.*s/%s", (int)n, p, name) < (int)size &&
            access(path, X_OK) == 0)
            return 0;
        p += n + (p[n] == ':');
    }
    return -1;
}

/* The launcher's world size (OMPI_COMM_WORLD_SIZE, else WORLD_SIZE), 0 when none. */
static int launched_world(void) {
    const char *v = getenv("OMPI_COMM_WORLD_SIZE");
    if (!v || !*v) v = getenv("WORLD_SIZE");
    return v && *v ? atoi(v) : 0;
}

/* Each rank's OpenMP threads: the cores shared out, unless the user chose. */
static void share_cores(int nproc) {
    if (getenv("OMP_NUM_THREADS")) return;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char v[32];
    snprintf(v, sizeof v, "%ld", cores / nproc > 0 ? cores / nproc : 1);
    setenv("OMP_NUM_THREADS", v, 1);
}

/* argv less --nproc N / --nproc=N into a from index k on; the new count. */
static int copy_without_nproc(int argc, char **argv, char **a, int k) {
    for (int i = 0; i < argc; i++) {
        if (i > 0 && !strcmp(argv[i], "--nproc")) {
            i++;
            continue;
        }
        if (i > 0 && !strncmp(argv[i], "--nproc=", 8)) continue;
        a[k++] = argv[i];
    }
    return k;
}

/* mpirun's command line: its options, this graft, then argv less --nproc. NULL: no memory. */
static char **mpirun_argv(const char *mpirun, const char *self, int nproc, int argc, char **argv) {
    char **a = calloc((size_t)argc + 12, sizeof *a);
    static char np[16];
    if (!a) return NULL;
    snprintf(np, sizeof np, "%d", nproc);
    int k = 0;
    a[k++] = (char *)mpirun, a[k++] = "-np", a[k++] = np;
    /* Ranks share the host's cores (OMP_NUM_THREADS each); Open MPI would pin each to one core
     * and refuse more ranks than cores. */
    a[k++] = "--bind-to", a[k++] = "none";
    /* finetune reads no input; mpirun, in a process group of its own, must not read the tty */
    a[k++] = "--stdin", a[k++] = "none";
    if (nproc > sysconf(_SC_NPROCESSORS_ONLN)) a[k++] = "--oversubscribe";
    a[k++] = (char *)self;
    copy_without_nproc(argc, argv, a, k);
    return a;
}

static volatile sig_atomic_t mpirun_pid, interrupts;

/* Ctrl-C reaches only this process (mpirun runs in a process group of its own): the first is
 * passed on as SIGUSR1, which mpirun forwards to every rank, and the ranks stop together as one
 * process stops on Ctrl-C (the checkpoint written); a second ends the job (SIGINT to mpirun). */
static void forward_interrupt(int sig) {
    (void)sig;
    if (mpirun_pid > 0) kill((pid_t)mpirun_pid, interrupts++ ? SIGINT : SIGUSR1);
}

static int run_and_wait(char **a, const char *cmd, int nproc) {
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "graft %s --nproc %d: cannot start mpirun: %s\n", cmd, nproc,
                strerror(errno));
        return 1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        execv(a[0], a);
        fprintf(stderr, "graft: cannot run %s: %s\n", a[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    mpirun_pid = pid;
    signal(SIGINT, forward_interrupt);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 130)
        fprintf(stderr,
                "graft: the run over %d processes failed (mpirun exit status %d): a rank "
                "stopped with an error or died; its message, or mpirun's, is above\n",
                nproc, code);
    return code ? code : 1;
}

/* A loopback port nothing listens on now (the kernel's pick), for the ranks' rendezvous. */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

static volatile sig_atomic_t ranks_group;

/* Ctrl-C with ranks of our own (their process group): SIGUSR1 first (they stop together, rank 0
 * writing the checkpoint), SIGKILL on a second. */
static void forward_to_ranks(int sig) {
    (void)sig;
    if (ranks_group > 0) kill(-(pid_t)ranks_group, interrupts++ ? SIGKILL : SIGUSR1);
}

/* Start rank i of n: this graft with torchrun's variables (the NCCL backend's launch). */
static pid_t start_rank(const char *self, char **a, int i, int n) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    setpgid(0, ranks_group > 0 ? (pid_t)ranks_group : 0);
    char rank[16], world[16];
    snprintf(rank, sizeof rank, "%d", i), snprintf(world, sizeof world, "%d", n);
    setenv("RANK", rank, 1), setenv("LOCAL_RANK", rank, 1), setenv("WORLD_SIZE", world, 1);
    setenv("LOCAL_WORLD_SIZE", world, 1);
    execv(self, a);
    fprintf(stderr, "graft: cannot run %s: %s\n", self, strerror(errno));
    _exit(127);
}

/* --nproc N without mpirun in a build with NCCL: N ranks of this graft, one per local GPU, meeting
 * at a loopback port; the first to fail ends the others. Its exit status. */
static int run_own_ranks(const char *self, int nproc, int argc, char **argv) {
    char **a = calloc((size_t)argc + 2, sizeof *a), port[16];
    if (!a) return 1;
    a[0] = (char *)self;
    copy_without_nproc(argc, argv, a, 1);
    snprintf(port, sizeof port, "%d", free_port());
    setenv("MASTER_ADDR", "127.0.0.1", 1), setenv("MASTER_PORT", port, 1);
    fflush(stdout);
    signal(SIGINT, forward_to_ranks);
    int started = 0, code = 0;
    for (; started < nproc; started++) {
        pid_t pid = start_rank(self, a, started, nproc);
        if (pid < 0) break;
        if (started == 0) ranks_group = pid;
        setpgid(pid, (pid_t)ranks_group);
    }
    for (int left = started; left > 0; left--) {
        int status = 0;
        pid_t pid;
        while ((pid = waitpid(-(pid_t)ranks_group, &status, 0)) < 0 && errno == EINTR) {
        }
        if (pid < 0) break;
        int c = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (c && !code) { /* the first failure ends the job, as mpirun does */
            code = c;
            kill(-(pid_t)ranks_group, SIGKILL);
        }
    }
    free(a);
    if (started < nproc) {
        fprintf(stderr, "graft: --nproc %d: could start only %d ranks: %s\n", nproc, started,
                strerror(errno));
        return 1;
    }
    if (code && code != 130)
        fprintf(stderr,
                "graft: the run over %d processes failed (exit status %d): a rank stopped with "
                "an error or died; its message is above\n",
                nproc, code);
    return code;
}

/* Whether --nproc N can start its ranks itself, over NCCL: a build with it and N local GPUs. */
static bool own_ranks_possible(int nproc, int *gpus) {
    char why[256];
    *gpus = GRAFT_HAVE_NCCL ? graft_gpu_count(why, sizeof why) : 0;
    return GRAFT_HAVE_NCCL && *gpus >= nproc;
}

int launch_relaunch(int nproc, int argc, char **argv, int *rc) {
    int world = launched_world();
    /* Set by the re-launching graft: an mpirun that is not Open MPI's starts N lone processes. */
    const char *asked = getenv("GRAFT_NPROC_LAUNCHED");
    if (asked && atoi(asked) != world) {
        fprintf(stderr,
                "graft %s: started by `graft --nproc %s` under mpirun, but this process sees "
                "%d ranks (OMPI_COMM_WORLD_SIZE): is the mpirun on the PATH Open MPI's?\n",
                argv[0], asked, world);
        *rc = 2;
        return 1;
    }
    if (world > 0) { /* already a rank: --nproc is what the launcher did */
        if (nproc > 1 && nproc != world) {
            fprintf(stderr, "graft %s: --nproc %d, but the launcher started %d ranks\n", argv[0],
                    nproc, world);
            *rc = 2;
            return 1;
        }
        return 0;
    }
    /* GRAFT_DIST_BACKEND set: --nproc 1 too runs as a group (of one), to check that path */
    const char *backend = getenv("GRAFT_DIST_BACKEND");
    if (nproc < 1 || (nproc == 1 && !(backend && *backend))) return 0;
    char mpirun[PATH_MAX], self[PATH_MAX];
    int gpus = 0;
    bool have_mpirun = find_on_path("mpirun", mpirun, sizeof mpirun) == 0;
    bool own = !have_mpirun && own_ranks_possible(nproc, &gpus);
    if (!have_mpirun && !own) {
        fprintf(stderr,
                "graft %s: --nproc %d needs mpirun on the PATH (Debian: apt-get install "
                "openmpi-bin), or launch the ranks yourself: mpirun -np %d graft %s ...%s\n",
                argv[0], nproc, nproc, argv[0],
                GRAFT_HAVE_NCCL ? " (without mpirun, graft starts one rank per GPU over NCCL "
                                  "itself, but this host has fewer GPUs)"
                                : "");
        *rc = 2;
        return 1;
    }
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "graft %s: --nproc: cannot find this program (/proc/self/exe)\n", argv[0]);
        *rc = 1;
        return 1;
    }
    self[n] = 0;
    share_cores(nproc);
    if (own) {
        *rc = run_own_ranks(self, nproc, argc, argv);
        return 1;
    }
    char n_text[16];
    snprintf(n_text, sizeof n_text, "%d", nproc);
    setenv("GRAFT_NPROC_LAUNCHED", n_text, 1);
    char **a = mpirun_argv(mpirun, self, nproc, argc, argv);
    if (!a) {
        fprintf(stderr, "graft %s: out of memory\n", argv[0]);
        *rc = 1;
        return 1;
    }
    fflush(stdout);
    *rc = run_and_wait(a, argv[0], nproc);
    free(a);
    return 1;
}

int launch_join(const char *cmd, graft_ctx *ctx) {
    if (graft_ctx_distribute(ctx) != GRAFT_OK) {
        fprintf(stderr, "graft %s: %s\n", cmd, graft_last_error(ctx));
        return 1;
    }
    if (graft_ctx_rank(ctx) != 0 && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "graft %s: rank %d: cannot silence its output\n", cmd, graft_ctx_rank(ctx));
        return 1;
    }
    return 0;
}

bool launch_writes(const graft_ctx *ctx) {
    return graft_ctx_rank(ctx) == 0;
}
