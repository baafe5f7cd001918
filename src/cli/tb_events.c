/* tb_events.c: TensorBoard event files: Event protos in TFRecord framing with masked CRC32C. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "run_log_internal.h"
#include "tensorboard.pb-c.h"

struct tb_writer {
    FILE *f;
    char *path;
};

static uint32_t crc_table[256];
static int crc_table_ready;

/* Reflected CRC32C table, polynomial 0x82F63B78. */
static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
    crc_table_ready = 1;
}

uint32_t tb_crc32c(const void *data, size_t n) {
    const unsigned char *p = data;
    uint32_t c = 0xFFFFFFFFu;
    if (!crc_table_ready) crc_init();
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

uint32_t tb_masked_crc32c(const void *data, size_t n) {
    uint32_t crc = tb_crc32c(data, n);
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static void put_le(unsigned char *out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) out[i] = (unsigned char)(v >> (8 * i));
}

/* One TFRecord: length, masked CRC of the length, data, masked CRC of the data. */
static int write_record(tb_writer *w, const void *data, size_t n, char *err, size_t err_size) {
    unsigned char head[12], tail[4];
    put_le(head, (uint64_t)n, 8);
    put_le(head + 8, tb_masked_crc32c(head, 8), 4);
    put_le(tail, tb_masked_crc32c(data, n), 4);
    if (fwrite(head, 1, 12, w->f) != 12 || fwrite(data, 1, n, w->f) != n ||
        fwrite(tail, 1, 4, w->f) != 4 || fflush(w->f) != 0) {
        snprintf(err, err_size, "cannot write '%s': %s", w->path, strerror(errno));
        return -1;
    }
    return 0;
}

static int write_event(tb_writer *w, const GraftTb__Event *ev, char *err, size_t err_size) {
    size_t n = graft_tb__event__get_packed_size(ev);
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf) {
        snprintf(err, err_size, "out of memory writing a TensorBoard event");
        return -1;
    }
    graft_tb__event__pack(ev, buf);
    int rc = write_record(w, buf, n, err, err_size);
    free(buf);
    return rc;
}

tb_writer *tb_open(const char *dir, double wall_time, char *err, size_t err_size) {
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) strcpy(host, "localhost");
    host[sizeof host - 1] = 0;
    for (char *c = host; *c; c++)
        if (*c == '/') *c = '_';
    tb_writer *w = calloc(1, sizeof *w);
    size_t len = strlen(dir) + strlen(host) + 64;
    if (w) w->path = malloc(len);
    if (!w || !w->path) {
        free(w);
        snprintf(err, err_size, "out of memory opening the TensorBoard event file");
        return NULL;
    }
    snprintf(w->path, len, "%s/events.out.tfevents.%lld.%s", dir, (long long)wall_time, host);
    w->f = fopen(w->path, "wb");
    if (!w->f) {
        snprintf(err, err_size, "cannot create '%s': %s", w->path, strerror(errno));
        free(w->path);
        free(w);
        return NULL;
    }
    GraftTb__Event ev = GRAFT_TB__EVENT__INIT;
    ev.has_wall_time = 1;
    ev.wall_time = wall_time;
    ev.has_step = 1;
    ev.step = 0;
    ev.file_version = "brain.Event:2";
    if (write_event(w, &ev, err, err_size) != 0) {
        tb_close(w, NULL, 0);
        return NULL;
    }
    return w;
}

int tb_scalar(tb_writer *w, const char *tag, int64_t step, double wall_time, float value, char *err,
              size_t err_size) {
    GraftTb__Value v = GRAFT_TB__VALUE__INIT;
    GraftTb__Value *values[1] = {&v};
    GraftTb__Summary sum = GRAFT_TB__SUMMARY__INIT;
    GraftTb__Event ev = GRAFT_TB__EVENT__INIT;
    v.tag = (char *)tag;
    v.has_simple_value = 1;
    v.simple_value = value;
    sum.n_value = 1;
    sum.value = values;
    ev.has_wall_time = 1;
    ev.wall_time = wall_time;
    ev.has_step = 1;
    ev.step = step;
    ev.summary = &sum;
    return write_event(w, &ev, err, err_size);
}

int tb_close(tb_writer *w, char *err, size_t err_size) {
    int rc = 0;
    if (!w) return 0;
    if (w->f && fclose(w->f) != 0) {
        if (err) snprintf(err, err_size, "cannot close '%s': %s", w->path, strerror(errno));
        rc = -1;
    }
    free(w->path);
    free(w);
    return rc;
}
