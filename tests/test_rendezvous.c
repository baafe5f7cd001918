/* test_rendezvous.c: the TCP rendezvous of torchrun-style launches, with real processes on
 * loopback: the id reaches every rank whatever order they start in; a rank that never comes, a
 * wrong world size, a rank taken twice, a stray connection, a port in use, a bad address. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dist/rendezvous.h"
#include "test_util.h"

#define ID_BYTES 128

/* A port nothing listens on now (the kernel's pick, released). */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return 29500;
    close(fd);
    return ntohs(a.sin_port);
}

typedef struct member {
    int rank, world;   /* what this process says it is */
    double start_late; /* seconds before it joins */
} member;

typedef struct outcome {
    int ok;
    unsigned char id[ID_BYTES];
    char msg[1024];
} outcome;

static void fill_id(unsigned char *id) {
    for (int i = 0; i < ID_BYTES; i++) id[i] = (unsigned char)(i * 7 + 3);
}

/* Run the members as processes meeting at port (addr for the joiners); their outcomes. */
static void meet(const member *m, int n, const char *addr, int port, double timeout, outcome *out) {
    int fds[8][2];
    pid_t pids[8];
    for (int i = 0; i < n; i++) {
        if (pipe(fds[i]) != 0) return;
        pids[i] = fork();
        if (pids[i] == 0) {
            close(fds[i][0]);
            struct timespec late = {(time_t)m[i].start_late,
                                    (long)((m[i].start_late - (int)m[i].start_late) * 1e9)};
            nanosleep(&late, NULL);
            outcome o = {0};
            if (m[i].rank == 0) fill_id(o.id);
            graft_err e = {0};
            o.ok = dist_rendezvous(addr, port, m[i].rank, m[i].world, o.id, ID_BYTES, timeout,
                                   &e) == GRAFT_OK;
            snprintf(o.msg, sizeof o.msg, "%s", e.msg);
            ssize_t w = write(fds[i][1], &o, sizeof o);
            _exit(w == (ssize_t)sizeof o ? 0 : 1);
        }
        close(fds[i][1]);
    }
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        if (read(fds[i][0], &out[i], sizeof out[i]) != (ssize_t)sizeof out[i])
            snprintf(out[i].msg, sizeof out[i].msg, "the process wrote no outcome");
        close(fds[i][0]);
        waitpid(pids[i], NULL, 0);
    }
}

static bool has_id(const outcome *o) {
    unsigned char want[ID_BYTES];
    fill_id(want);
    return o->ok && !memcmp(o->id, want, ID_BYTES);
}

static void test_meeting(void) {
    /* rank 0 starts last: the others retry until it listens */
    member m[4] = {{0, 4, 0.6}, {1, 4, 0.0}, {2, 4, 0.2}, {3, 4, 0.0}};
    outcome o[4];
    meet(m, 4, "localhost", free_port(), 20.0, o);
    bool ok = true;
    for (int i = 0; i < 4; i++) ok = ok && has_id(&o[i]);
    CHECK("four_ranks_get_the_id", ok, "%s | %s | %s | %s", o[0].msg, o[1].msg, o[2].msg, o[3].msg);
    member one[1] = {{0, 1, 0.0}};
    meet(one, 1, NULL, free_port(), 5.0, o);
    CHECK("one_rank_alone", o[0].ok, "%s", o[0].msg);
}

static void test_missing_rank(void) {
    member m[2] = {{0, 3, 0.0}, {1, 3, 0.0}}; /* rank 2 never comes */
    outcome o[2];
    time_t t0 = time(NULL);
    meet(m, 2, "127.0.0.1", free_port(), 1.5, o);
    double took = difftime(time(NULL), t0);
    CHECK("missing_rank_times_out",
          !o[0].ok && !o[1].ok && strstr(o[0].msg, "1 of the 2 other ranks came") && took < 10,
          "%.0f s: %s | %s", took, o[0].msg, o[1].msg);
}

static void test_refusals(void) {
    member world[2] = {{0, 2, 0.0}, {1, 3, 0.1}};
    outcome o[3];
    meet(world, 2, "127.0.0.1", free_port(), 3.0, o);
    CHECK("other_world_size_refused",
          !o[0].ok && !o[1].ok && strstr(o[1].msg, "another WORLD_SIZE") &&
              strstr(o[0].msg, "refused"),
          "%s | %s", o[0].msg, o[1].msg);
    member twice[3] = {{0, 3, 0.0}, {1, 3, 0.1}, {1, 3, 0.4}};
    meet(twice, 3, "127.0.0.1", free_port(), 3.0, o);
    CHECK("rank_taken_twice_refused",
          !o[0].ok && strstr(o[0].msg, "already came") && strstr(o[2].msg, "refused"),
          "%s | %s | %s", o[0].msg, o[1].msg, o[2].msg);
}

/* A connection that is not a graft rank (a port scan, a stale client) is dropped; the meeting
 * goes on. */
static void test_stray_connection(void) {
    int port = free_port();
    pid_t stray = fork();
    if (stray == 0) {
        struct timespec wait = {0, 200 * 1000 * 1000};
        nanosleep(&wait, NULL);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
            ssize_t w = write(fd, "GET / HTTP/1.0\r\n\r\n", 18);
            (void)w;
        }
        _exit(0);
    }
    member m[2] = {{0, 2, 0.0}, {1, 2, 0.6}};
    outcome o[2];
    meet(m, 2, "127.0.0.1", port, 5.0, o);
    waitpid(stray, NULL, 0);
    CHECK("stray_connection_ignored", has_id(&o[0]) && has_id(&o[1]), "%s | %s", o[0].msg,
          o[1].msg);
}

/* A connection that says nothing (a port scanner, a hung client) is dropped after a few seconds
 * instead of holding rank 0 until the meeting's timeout. */
static void test_silent_connection(void) {
    int port = free_port();
    pid_t stray = fork();
    if (stray == 0) {
        struct timespec wait = {0, 200 * 1000 * 1000}, hold = {30, 0};
        nanosleep(&wait, NULL);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) nanosleep(&hold, NULL);
        _exit(0);
    }
    member m[2] = {{0, 2, 0.0}, {1, 2, 0.6}};
    outcome o[2];
    meet(m, 2, "127.0.0.1", port, 15.0, o);
    kill(stray, SIGKILL);
    waitpid(stray, NULL, 0);
    CHECK("silent_connection_dropped", has_id(&o[0]) && has_id(&o[1]), "%s | %s", o[0].msg,
          o[1].msg);
}

static void test_bad_places(void) {
    int port = free_port();
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a = {
        .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port), .sin6_addr = in6addr_any};
    bool held = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 1) == 0;
    unsigned char id[ID_BYTES];
    graft_err e = {0};
    graft_status st = dist_rendezvous(NULL, port, 0, 2, id, ID_BYTES, 2.0, &e);
    CHECK("port_in_use", !held || (st == GRAFT_E_IO && strstr(e.msg, "MASTER_PORT")), "%s", e.msg);
    if (fd >= 0) close(fd);
    st = dist_rendezvous("no-such-host.invalid", port, 1, 2, id, ID_BYTES, 2.0, &e);
    CHECK("unknown_master_addr", st == GRAFT_E_INVALID_ARGUMENT && strstr(e.msg, "MASTER_ADDR"),
          "%s", e.msg);
    st = dist_rendezvous("127.0.0.1", 70000, 1, 2, id, ID_BYTES, 2.0, &e);
    CHECK("port_out_of_range", st == GRAFT_E_INVALID_ARGUMENT, "%s", e.msg);
    st = dist_rendezvous("127.0.0.1", free_port(), 1, 2, id, ID_BYTES, 0.5, &e);
    CHECK("no_rank_zero", st == GRAFT_E_IO && strstr(e.msg, "no rank 0 answered"), "%s", e.msg);
}

/* torchrun's agent holds MASTER_PORT on rank 0's host (its store): the ranks meet on the next
 * port (rendezvous_port_from_env), which this test checks with MASTER_PORT really held. */
static void test_agent_store_port(void) {
    int port = free_port();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_ANY)};
    bool held = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 1) == 0;
    char text[16];
    snprintf(text, sizeof text, "%d", port);
    setenv("MASTER_PORT", text, 1);
    setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
    graft_err e = {0};
    int meet_at = 0;
    graft_status st = rendezvous_port_from_env(&meet_at, &e);
    CHECK("agent_store_next_port", held && st == GRAFT_OK && meet_at == port + 1, "%d -> %d: %s",
          port, meet_at, e.msg);
    member m[2] = {{0, 2, 0.0}, {1, 2, 0.0}};
    outcome o[2];
    meet(m, 2, "127.0.0.1", meet_at, 5.0, o);
    CHECK("agent_store_meeting", has_id(&o[0]) && has_id(&o[1]), "%s | %s", o[0].msg, o[1].msg);
    if (fd >= 0) close(fd);
    setenv("GRAFT_RENDEZVOUS_PORT", "29777", 1);
    st = rendezvous_port_from_env(&meet_at, &e);
    CHECK("own_port_wins", st == GRAFT_OK && meet_at == 29777, "%d: %s", meet_at, e.msg);
    setenv("GRAFT_RENDEZVOUS_PORT", "99999", 1);
    st = rendezvous_port_from_env(&meet_at, &e);
    CHECK("own_port_checked", st != GRAFT_OK && strstr(e.msg, "GRAFT_RENDEZVOUS_PORT=99999"), "%s",
          e.msg);
    unsetenv("GRAFT_RENDEZVOUS_PORT"), unsetenv("TORCHELASTIC_USE_AGENT_STORE");
    unsetenv("MASTER_PORT");
    st = rendezvous_port_from_env(&meet_at, &e);
    CHECK("master_port_missing", st != GRAFT_OK && strstr(e.msg, "MASTER_PORT"), "%s", e.msg);
}

/* Launched by torchrun (RANK, WORLD_SIZE set): this process is one rank of a real meeting. */
static int torchrun_rank(void) {
    int rank = atoi(getenv("RANK")), world = atoi(getenv("WORLD_SIZE")), port = 0;
    graft_err e = {0};
    unsigned char id[ID_BYTES] = {0};
    if (rank == 0) fill_id(id);
    graft_status st = rendezvous_port_from_env(&port, &e);
    if (st == GRAFT_OK)
        st = dist_rendezvous(getenv("MASTER_ADDR"), port, rank, world, id, ID_BYTES, 30.0, &e);
    unsigned char want[ID_BYTES];
    fill_id(want);
    char name[64];
    snprintf(name, sizeof name, "torchrun_rank_%d_of_%d", rank, world);
    CHECK(name, st == GRAFT_OK && !memcmp(id, want, ID_BYTES), "port %d: %s", port, e.msg);
    return test_failures ? 1 : 0;
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    if (getenv("RANK") && getenv("WORLD_SIZE")) return torchrun_rank();
    test_meeting();
    test_missing_rank();
    test_refusals();
    test_stray_connection();
    test_silent_connection();
    test_bad_places();
    test_agent_store_port();
    return test_failures ? 1 : 0;
}
