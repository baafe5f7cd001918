/* tb_events.c: TensorBoard event files: Event protos in TFRecord framing with masked CRC32C;
 * scalars and the HParams plugin's experiment, session start and end. */
#include <errno.h>
#include <math.h>
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

/* An HParams plugin summary at step 0: TAG, the plugin data in the metadata, and the empty float
 * vector TensorBoard's own writers put in the tensor. */
static int write_hparams(tb_writer *w, const char *tag, GraftTb__HParamsPluginData *data,
                         double wall_time, char *err, size_t err_size) {
    data->has_version = 1;
    data->version = 0;
    size_t n = graft_tb__hparams_plugin_data__get_packed_size(data);
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf) {
        snprintf(err, err_size, "out of memory writing TensorBoard hparams");
        return -1;
    }
    graft_tb__hparams_plugin_data__pack(data, buf);
    GraftTb__PluginData plugin = GRAFT_TB__PLUGIN_DATA__INIT;
    plugin.plugin_name = "hparams";
    plugin.has_content = 1;
    plugin.content.data = buf;
    plugin.content.len = n;
    GraftTb__SummaryMetadata meta = GRAFT_TB__SUMMARY_METADATA__INIT;
    meta.plugin_data = &plugin;
    GraftTb__TensorShapeDim dim = GRAFT_TB__TENSOR_SHAPE_DIM__INIT;
    GraftTb__TensorShapeDim *dims[1] = {&dim};
    dim.has_size = 1;
    GraftTb__TensorShape shape = GRAFT_TB__TENSOR_SHAPE__INIT;
    shape.n_dim = 1, shape.dim = dims;
    GraftTb__Tensor tensor = GRAFT_TB__TENSOR__INIT;
    tensor.has_dtype = 1, tensor.dtype = 1, tensor.tensor_shape = &shape;
    GraftTb__Value v = GRAFT_TB__VALUE__INIT;
    GraftTb__Value *values[1] = {&v};
    v.tag = (char *)tag, v.metadata = &meta, v.tensor = &tensor;
    GraftTb__Summary sum = GRAFT_TB__SUMMARY__INIT;
    sum.n_value = 1, sum.value = values;
    GraftTb__Event ev = GRAFT_TB__EVENT__INIT;
    ev.has_wall_time = 1, ev.wall_time = wall_time;
    ev.has_step = 1, ev.step = 0;
    ev.summary = &sum;
    int rc = write_event(w, &ev, err, err_size);
    free(buf);
    return rc;
}

int tb_hparams_start(tb_writer *w, const rl_pairs *config, double start_time, char *err,
                     size_t err_size) {
    size_t n = config->n;
    GraftTb__HParamEntry *entries = calloc(n ? n : 1, sizeof *entries);
    GraftTb__HParamEntry **ptrs = calloc(n ? n : 1, sizeof *ptrs);
    GraftTb__ProtoValue *vals = calloc(n ? n : 1, sizeof *vals);
    if (!entries || !ptrs || !vals) {
        free(entries), free(ptrs), free(vals);
        snprintf(err, err_size, "out of memory writing TensorBoard hparams");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const run_log_value *cv = &config->items[i].value;
        GraftTb__ProtoValue *pv = &vals[i];
        graft_tb__proto_value__init(pv);
        if (cv->type == RUN_LOG_TEXT) {
            pv->string_value = (char *)cv->as.text;
        } else if (cv->type == RUN_LOG_FLOAT && !isfinite(cv->as.f)) {
            pv->string_value = isnan(cv->as.f) ? "nan" : cv->as.f > 0 ? "inf" : "-inf";
        } else if (cv->type == RUN_LOG_BOOL) {
            pv->has_bool_value = 1, pv->bool_value = cv->as.b;
        } else {
            pv->has_number_value = 1;
            pv->number_value = cv->type == RUN_LOG_INT ? (double)cv->as.i : cv->as.f;
        }
        graft_tb__hparam_entry__init(&entries[i]);
        entries[i].key = config->items[i].key, entries[i].value = pv;
        ptrs[i] = &entries[i];
    }
    GraftTb__SessionStartInfo start = GRAFT_TB__SESSION_START_INFO__INIT;
    start.n_hparams = n, start.hparams = ptrs;
    start.has_start_time_secs = 1, start.start_time_secs = start_time;
    GraftTb__HParamsPluginData data = GRAFT_TB__HPARAMS_PLUGIN_DATA__INIT;
    data.data_case = GRAFT_TB__HPARAMS_PLUGIN_DATA__DATA_SESSION_START_INFO;
    data.session_start_info = &start;
    int rc = write_hparams(w, "_hparams_/session_start_info", &data, start_time, err, err_size);
    free(entries), free(ptrs), free(vals);
    return rc;
}

/* A non-finite float goes as text ("nan", "inf"): TensorBoard's JSON has no number for it. */
static GraftTb__HParamType hparam_type(const run_log_value *v) {
    if (v->type == RUN_LOG_BOOL) return GRAFT_TB__HPARAM_TYPE__DATA_TYPE_BOOL;
    if (v->type == RUN_LOG_INT || (v->type == RUN_LOG_FLOAT && isfinite(v->as.f)))
        return GRAFT_TB__HPARAM_TYPE__DATA_TYPE_FLOAT64;
    return GRAFT_TB__HPARAM_TYPE__DATA_TYPE_STRING;
}

/* The experiment: every option as an hparam of its type, each tag as a metric (val/ ones of the
 * validation set). */
static int write_experiment(tb_writer *w, const rl_pairs *config, const char *const *tags,
                            size_t n_tags, double wall_time, char *err, size_t err_size) {
    size_t n = config->n;
    GraftTb__HParamInfo *hp = calloc(n ? n : 1, sizeof *hp);
    GraftTb__HParamInfo **hpp = calloc(n ? n : 1, sizeof *hpp);
    GraftTb__MetricInfo *mi = calloc(n_tags ? n_tags : 1, sizeof *mi);
    GraftTb__MetricInfo **mip = calloc(n_tags ? n_tags : 1, sizeof *mip);
    GraftTb__MetricName *mn = calloc(n_tags ? n_tags : 1, sizeof *mn);
    int rc = -1;
    if (!hp || !hpp || !mi || !mip || !mn) {
        snprintf(err, err_size, "out of memory writing TensorBoard hparams");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        graft_tb__hparam_info__init(&hp[i]);
        hp[i].name = config->items[i].key;
        hp[i].has_type = 1, hp[i].type = hparam_type(&config->items[i].value);
        hpp[i] = &hp[i];
    }
    for (size_t i = 0; i < n_tags; i++) {
        graft_tb__metric_name__init(&mn[i]);
        mn[i].tag = (char *)tags[i];
        graft_tb__metric_info__init(&mi[i]);
        mi[i].name = &mn[i];
        if (strncmp(tags[i], "val/", 4) == 0)
            mi[i].has_dataset_type = 1,
            mi[i].dataset_type = GRAFT_TB__DATASET_TYPE__DATASET_VALIDATION;
        mip[i] = &mi[i];
    }
    GraftTb__Experiment ex = GRAFT_TB__EXPERIMENT__INIT;
    ex.has_time_created_secs = 1, ex.time_created_secs = wall_time;
    ex.n_hparam_infos = n, ex.hparam_infos = hpp;
    ex.n_metric_infos = n_tags, ex.metric_infos = mip;
    GraftTb__HParamsPluginData data = GRAFT_TB__HPARAMS_PLUGIN_DATA__INIT;
    data.data_case = GRAFT_TB__HPARAMS_PLUGIN_DATA__DATA_EXPERIMENT;
    data.experiment = &ex;
    rc = write_hparams(w, "_hparams_/experiment", &data, wall_time, err, err_size);
done:
    free(hp), free(hpp), free(mi), free(mip), free(mn);
    return rc;
}

int tb_hparams_end(tb_writer *w, const rl_pairs *config, const char *const *metric_tags,
                   size_t n_metrics, run_log_status status, double end_time, char *err,
                   size_t err_size) {
    if (write_experiment(w, config, metric_tags, n_metrics, end_time, err, err_size) != 0)
        return -1;
    GraftTb__SessionEndInfo end = GRAFT_TB__SESSION_END_INFO__INIT;
    end.has_status = 1;
    end.status = status == RUN_LOG_COMPLETED ? GRAFT_TB__SESSION_STATUS__STATUS_SUCCESS
                                             : GRAFT_TB__SESSION_STATUS__STATUS_FAILURE;
    end.has_end_time_secs = 1, end.end_time_secs = end_time;
    GraftTb__HParamsPluginData data = GRAFT_TB__HPARAMS_PLUGIN_DATA__INIT;
    data.data_case = GRAFT_TB__HPARAMS_PLUGIN_DATA__DATA_SESSION_END_INFO;
    data.session_end_info = &end;
    return write_hparams(w, "_hparams_/session_end_info", &data, end_time, err, err_size);
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
