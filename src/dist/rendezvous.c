/* rendezvous.c: the TCP meeting of rendezvous.h: rank 0 serves the payload to the others, every
 * socket operation bounded by one deadline. */
#define _POSIX_C_SOURCE 200809L
#include "rendezvous.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "../core/clock.h"

#define RDV_MAGIC 0x47524654u /* "GRFT" */
#define RDV_VERSION 1u
#define RDV_MAX_PAYLOAD (1u << 20)

enum { RDV_OK = 0, RDV_WRONG_WORLD = 1, RDV_DUPLICATE = 2, RDV_WRONG_SIZE = 3, RDV_FAILED = 4 };

typedef struct hello {
    uint32_t magic, version, rank, world, bytes;
} hello;

static int ms_left(double deadline) {
    double left = deadline - clock_seconds();
    return left <= 0 ? 0 : left > 1e6 ? 1000000000 : (int)(left * 1000.0) + 1;
}

/* Wait until fd is readable (events POLLIN) or writable (POLLOUT): 1 ready, 0 deadline passed,
 * -1 error. */
static int wait_fd(int fd, short events, double deadline) {
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int left = ms_left(deadline);
        if (left == 0) return 0;
        int r = poll(&p, 1, left);
        if (r > 0) return 1;
        if (r == 0) return 0;
        if (errno != EINTR) return -1;
    }
}

/* All n bytes through a non-blocking socket before the deadline: 0, or -1 (errno set; ETIMEDOUT
 * when the deadline passed, EPIPE when the peer closed). */
static int move_all(int fd, void *buf, size_t n, bool out, double deadline) {
    char *p = buf;
    while (n > 0) {
        ssize_t k = out ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k > 0) {
            p += k, n -= (size_t)k;
            continue;
        }
        if (k == 0) {
            errno = EPIPE;
            return -1;
        }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
        int r = wait_fd(fd, out ? POLLOUT : POLLIN, deadline);
        if (r <= 0) {
            if (r == 0) errno = ETIMEDOUT;
            return -1;
        }
    }
    return 0;
}

static void put_words(uint32_t *w, int n) {
    for (int i = 0; i < n; i++) w[i] = htonl(w[i]);
}

static void get_words(uint32_t *w, int n) {
    for (int i = 0; i < n; i++) w[i] = ntohl(w[i]);
}

static int nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL, 0);
    return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

/* Rank 0's listening socket on every interface (IPv6 with IPv4 mapped, else IPv4). */
static graft_status listen_on(int port, int backlog, int *out, graft_err *e) {
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    bool v6 = fd >= 0;
    if (!v6) fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return err_set(e, GRAFT_E_IO, "rendezvous: socket: %s", strerror(errno));
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc;
    if (v6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        struct sockaddr_in6 a = {
            .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port), .sin6_addr = in6addr_any};
        rc = bind(fd, (struct sockaddr *)&a, sizeof a);
    } else {
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_ANY)};
        rc = bind(fd, (struct sockaddr *)&a, sizeof a);
    }
    if (rc != 0 || listen(fd, backlog) != 0 || nonblocking(fd) != 0) {
        int err = errno;
        close(fd);
        return err_set(e, GRAFT_E_IO,
                       "rendezvous: rank 0 cannot listen on port %d (MASTER_PORT): %s%s", port,
                       strerror(err),
                       err == EADDRINUSE ? " (another process holds it: choose another port)" : "");
    }
    *out = fd;
    return GRAFT_OK;
}

/* One connection attempt to one address before the deadline: the socket, or -1 (errno). */
static int connect_once(const struct addrinfo *a, double deadline) {
    int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) return -1;
    if (nonblocking(fd) != 0) goto fail;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) return fd;
    if (errno != EINPROGRESS) goto fail;
    int r = wait_fd(fd, POLLOUT, deadline), soerr = 0;
    socklen_t len = sizeof soerr;
    if (r <= 0) {
        errno = r == 0 ? ETIMEDOUT : errno;
        goto fail;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) goto fail;
    if (soerr == 0) return fd;
    errno = soerr;
fail:;
    int err = errno;
    close(fd);
    errno = err;
    return -1;
}

/* Connect to addr:port, retrying (rank 0 may not listen yet) until the deadline. */
static graft_status connect_to(const char *addr, int port, double deadline, int *out,
                               graft_err *e) {
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *list = NULL;
    int g = getaddrinfo(addr, service, &hints, &list);
    if (g != 0)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "rendezvous: MASTER_ADDR=%s: %s", addr,
                       gai_strerror(g));
    int last = ECONNREFUSED;
    for (;;) {
        for (struct addrinfo *a = list; a; a = a->ai_next) {
            int fd = connect_once(a, deadline);
            if (fd >= 0) {
                freeaddrinfo(list);
                *out = fd;
                return GRAFT_OK;
            }
            last = errno;
        }
        if (ms_left(deadline) == 0) break;
        struct timespec pause = {0, 100 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    freeaddrinfo(list);
    return err_set(e, GRAFT_E_IO,
                   "rendezvous: no rank 0 answered at %s:%d (MASTER_ADDR:MASTER_PORT) within the "
                   "timeout: %s",
                   addr, port, strerror(last));
}

static const char *refusal(uint32_t code) {
    switch (code) {
    case RDV_WRONG_WORLD:
        return "it was started with another WORLD_SIZE than rank 0";
    case RDV_DUPLICATE:
        return "another process already came as this RANK";
    case RDV_WRONG_SIZE:
        return "its build exchanges another id size than rank 0's";
    default:
        return "the meeting failed on rank 0 (another rank was refused or did not come)";
    }
}

/* A non-zero rank: say who it is, take the payload, confirm. */
static graft_status join(const char *addr, int port, int rank, int world, void *payload,
                         size_t bytes, double deadline, graft_err *e) {
    int fd = -1;
    TRY(connect_to(addr, port, deadline, &fd, e));
    hello h = {RDV_MAGIC, RDV_VERSION, (uint32_t)rank, (uint32_t)world, (uint32_t)bytes};
    put_words(&h.magic, 5);
    uint32_t code = RDV_FAILED, ack = htonl(RDV_OK);
    graft_status st = GRAFT_OK;
    if (move_all(fd, &h, sizeof h, true, deadline) != 0 ||
        move_all(fd, &code, sizeof code, false, deadline) != 0)
        st = err_set(
            e, GRAFT_E_IO, "rendezvous: rank %d of %d: rank 0 at %s:%d: %s", rank, world, addr,
            port, errno == ETIMEDOUT ? "not every rank came within the timeout" : strerror(errno));
    else if ((code = ntohl(code)) != RDV_OK)
        st = err_set(e, GRAFT_E_INVALID_ARGUMENT, "rendezvous: rank 0 refused rank %d of %d: %s",
                     rank, world, refusal(code));
    else if (move_all(fd, payload, bytes, false, deadline) != 0 ||
             move_all(fd, &ack, sizeof ack, true, deadline) != 0)
        st = err_set(e, GRAFT_E_IO, "rendezvous: rank %d of %d: receiving the group's id: %s", rank,
                     world, strerror(errno));
    close(fd);
    return st;
}

#define HELLO_WAIT_S 5.0 /* a connection that has not said who it is by then is dropped */

/* Rank 0's answer to one hello: RDV_OK, or why it is refused. */
static uint32_t check_hello(const hello *h, int world, size_t bytes, const bool *seen) {
    if (h->world != (uint32_t)world || h->rank == 0 || h->rank >= (uint32_t)world)
        return RDV_WRONG_WORLD;
    if (h->bytes != bytes) return RDV_WRONG_SIZE;
    return seen[h->rank] ? RDV_DUPLICATE : RDV_OK;
}

/* Rank 0: accept connections until world - 1 ranks said who they are. A connection that is not
 * a graft rank (wrong magic, closed early, silent for HELLO_WAIT_S: a rank says who it is as
 * soon as it connects) is dropped; a rank that must be refused fails the meeting. fds[rank] the
 * connection of each rank. */
static graft_status gather_ranks(int lfd, int world, size_t bytes, int *fds, double deadline,
                                 graft_err *e) {
    bool *seen = calloc((size_t)world, sizeof *seen);
    if (!seen) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    graft_status st = GRAFT_OK;
    for (int came = 0; came < world - 1 && st == GRAFT_OK;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                st = err_set(e, GRAFT_E_IO, "rendezvous: accept: %s", strerror(errno));
            } else if (wait_fd(lfd, POLLIN, deadline) == 0) {
                st = err_set(e, GRAFT_E_IO,
                             "rendezvous: rank 0: %d of the %d other ranks came within the "
                             "timeout (GRAFT_DIST_TIMEOUT); the others never connected",
                             came, world - 1);
            }
            continue;
        }
        hello h;
        double hello_by = clock_seconds() + HELLO_WAIT_S;
        if (nonblocking(fd) != 0 ||
            move_all(fd, &h, sizeof h, false, hello_by < deadline ? hello_by : deadline) != 0) {
            close(fd);
            continue;
        }
        get_words(&h.magic, 5);
        if (h.magic != RDV_MAGIC || h.version != RDV_VERSION) {
            close(fd);
            continue;
        }
        uint32_t code = check_hello(&h, world, bytes, seen), net = htonl(code);
        if (code != RDV_OK) {
            (void)move_all(fd, &net, sizeof net, true, deadline);
            close(fd);
            st = err_set(e, GRAFT_E_INVALID_ARGUMENT,
                         "rendezvous: a process came as rank %u of %u, refused: %s", h.rank,
                         h.world, refusal(code));
            break;
        }
        seen[h.rank] = true;
        fds[h.rank] = fd;
        came++;
    }
    free(seen);
    return st;
}

/* Rank 0: tell every gathered rank the outcome, send the payload, take the confirmations. */
static graft_status serve(int world, const void *payload, size_t bytes, const int *fds, bool ok,
                          double deadline, graft_err *e) {
    uint32_t code = htonl(ok ? RDV_OK : RDV_FAILED);
    for (int r = 1; r < world; r++) {
        if (fds[r] < 0) continue;
        if (move_all(fds[r], &code, sizeof code, true, deadline) != 0 ||
            (ok && move_all(fds[r], (void *)payload, bytes, true, deadline) != 0))
            return err_set(e, GRAFT_E_IO, "rendezvous: sending the group's id to rank %d: %s", r,
                           strerror(errno));
    }
    for (int r = 1; ok && r < world; r++) {
        uint32_t ack = 0;
        if (move_all(fds[r], &ack, sizeof ack, false, deadline) != 0)
            return err_set(e, GRAFT_E_IO, "rendezvous: rank %d did not confirm the group's id: %s",
                           r, strerror(errno));
    }
    return GRAFT_OK;
}

graft_status dist_rendezvous(const char *addr, int port, int rank, int world, void *payload,
                             size_t bytes, double timeout_s, graft_err *e) {
    if (world < 1 || rank < 0 || rank >= world || port < 1 || port > 65535 ||
        bytes > RDV_MAX_PAYLOAD || !(timeout_s > 0))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "rendezvous: rank %d of %d at port %d (MASTER_PORT: 1 to 65535), %zu bytes",
                       rank, world, port, bytes);
    double deadline = clock_seconds() + timeout_s;
    if (world == 1) return GRAFT_OK;
    if (rank != 0) {
        if (!addr || !*addr)
            return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                           "rendezvous: rank %d needs MASTER_ADDR (rank 0's host)", rank);
        return join(addr, port, rank, world, payload, bytes, deadline, e);
    }
    int lfd = -1;
    TRY(listen_on(port, world < 128 ? world : 128, &lfd, e));
    int *fds = malloc(sizeof *fds * (size_t)world);
    if (!fds) {
        close(lfd);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    }
    for (int r = 0; r < world; r++) fds[r] = -1;
    graft_status st = gather_ranks(lfd, world, bytes, fds, deadline, e);
    graft_err ignored = {0};
    graft_status sent =
        serve(world, payload, bytes, fds, st == GRAFT_OK, deadline, st == GRAFT_OK ? e : &ignored);
    if (st == GRAFT_OK) st = sent;
    for (int r = 1; r < world; r++)
        if (fds[r] >= 0) close(fds[r]);
    free(fds);
    close(lfd);
    return st;
}

/* A port number from the variable name (1 to 65535). */
static graft_status port_var(const char *name, const char *v, int *port, graft_err *e) {
    char *end;
    errno = 0;
    long p = strtol(v, &end, 10);
    if (errno || *end || p < 1 || p > 65535)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "distributed launch: %s=%s is not a port (1 to 65535)", name, v);
    *port = (int)p;
    return GRAFT_OK;
}

graft_status rendezvous_port_from_env(int *port, graft_err *e) {
    const char *own = getenv("GRAFT_RENDEZVOUS_PORT");
    if (own && *own) return port_var("GRAFT_RENDEZVOUS_PORT", own, port, e);
    const char *p = getenv("MASTER_PORT");
    if (!p || !*p)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "distributed launch: RANK and WORLD_SIZE are set but MASTER_PORT is not "
                       "(with MASTER_ADDR, rank 0's host and port, as torchrun sets them)");
    TRY(port_var("MASTER_PORT", p, port, e));
    const char *agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
    if (agent && (!strcmp(agent, "True") || !strcmp(agent, "1") || !strcmp(agent, "true"))) {
        if (*port == 65535)
            return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                           "distributed launch: MASTER_PORT=65535 is torchrun's; graft's meeting "
                           "takes the next port: choose a lower one or set GRAFT_RENDEZVOUS_PORT");
        *port += 1;
    }
    return GRAFT_OK;
}
