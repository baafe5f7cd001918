/* fuzz_csv.c: libFuzzer target: the CSV/TSV record reader on the bytes, then the labelled-text
 * table loader on them as a file. The first byte picks the options (comma or tab, label mode,
 * a pair column, literal quotes). */
#include <stdint.h>
#include <stdlib.h>

#include "data/csv.h"
#include "data/text_table.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_records(const char *buf, size_t len, char delim, char quote) {
    csv_reader r;
    csv_reader_init(&r, buf, len, delim, quote);
    csv_result res;
    while ((res = csv_reader_next(&r)) == CSV_RECORD || res == CSV_UNTERMINATED) {
        for (int i = 0; i < r.nfields; i++) {
            size_t n = 0;
            const char *f = csv_field(&r, i, &n);
            if (f[n] != '\0') __builtin_trap(); /* fields are NUL-terminated */
        }
        size_t bad = 0;
        if (r.raw_end < r.raw_begin || r.raw_end > len) __builtin_trap();
        (void)utf8_valid(buf + r.raw_begin, r.raw_end - r.raw_begin, &bad);
        if (res == CSV_UNTERMINATED) break;
    }
    csv_reader_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t opt = data[0];
    const char *body = (const char *)data + 1;
    size_t n = size - 1;
    int tsv = opt & 1;
    read_records(body, n, tsv ? '\t' : ',', (opt & 8) ? 0 : '"');
    const char *path = fuzz_temp_file((const uint8_t *)body, n, tsv ? ".tsv" : ".csv");
    if (!path) return 0;
    text_table_options o = TEXT_TABLE_OPTIONS_INIT;
    o.label_mode = (text_label_mode)((opt >> 1) & 3);
    if (o.label_mode == TEXT_LABEL_NONE) o.label_column = NULL;
    if (o.label_mode == TEXT_LABEL_MULTI) o.label_separator = '|';
    o.literal_quotes = (opt >> 3) & 1;
    if (opt & 16) o.text_pair_column = "pair";
    text_table *t = NULL;
    graft_err e;
    if (text_table_load_csv(&t, path, &o, &e) != GRAFT_OK) return 0;
    int classes = text_table_class_count(t);
    float *vec = calloc((size_t)classes + 1, sizeof *vec);
    for (int64_t i = 0; i < text_table_count(t); i++) {
        (void)text_table_text(t, i), (void)text_table_text_pair(t, i), (void)text_table_line(t, i);
        int label = text_table_label(t, i), k = 0;
        if (label >= classes) __builtin_trap();
        (void)text_table_target(t, i);
        const int32_t *idx = text_table_label_indices(t, i, &k);
        for (int j = 0; j < k; j++)
            if (idx[j] < 0 || idx[j] >= classes) __builtin_trap();
        if (vec) text_table_label_vector(t, i, vec);
    }
    for (int c = 0; c < classes; c++) (void)text_table_class_name(t, c);
    for (int64_t i = 0; i < text_table_skipped_count(t); i++) (void)text_table_skipped(t, i);
    free(vec);
    text_table_free(t);
    return 0;
}
