/* test_text_table.c: the CSV/TSV reader against Python's csv module, and the labelled text table.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "data/csv.h"
#include "data/text_table.h"
#include "test_util.h"

static const char *dir; /* tests/data/text */

static char *fixture(const char *name) {
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    b[*len] = '\0';
    fclose(f);
    return b;
}

/* Append s (n bytes) escaped as tools/make_text_fixtures.py writes fields. */
static void put_escaped(FILE *f, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '\\':
            fputs("\\\\", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\0':
            fputs("\\0", f);
            break;
        default:
            fputc(s[i], f);
        }
    }
}

/* Every record of a fixture, in the expected-file format (invalid UTF-8 as is; Python's
 * surrogateescape gives the same bytes back). */
static void test_reference(const char *name, char delim) {
    char test[128];
    snprintf(test, sizeof test, "csv_matches_python_%s", name);
    size_t len, elen;
    char *buf = slurp(fixture(name), &len);
    char expected_path[1100];
    snprintf(expected_path, sizeof expected_path, "%s.expected", fixture(name));
    char *expected = slurp(expected_path, &elen);
    if (!buf || !expected) {
        CHECK(test, 0, "cannot read %s or its .expected (run tools/make_text_fixtures.py)", name);
        free(buf);
        free(expected);
        return;
    }
    char *got = NULL;
    size_t got_len = 0;
    FILE *f = open_memstream(&got, &got_len);
    csv_reader r;
    csv_reader_init(&r, buf, len, delim, '"');
    csv_result res;
    while ((res = csv_reader_next(&r)) == CSV_RECORD || res == CSV_UNTERMINATED) {
        fprintf(f, "%lld\t%s\t%d", (long long)r.record_line,
                res == CSV_RECORD ? "ok" : "unterminated", r.nfields);
        for (int i = 0; i < r.nfields; i++) {
            size_t n;
            const char *s = csv_field(&r, i, &n);
            fputc('\t', f);
            put_escaped(f, s, n);
        }
        fputc('\n', f);
        if (res == CSV_UNTERMINATED) break;
    }
    fclose(f);
    size_t at = 0;
    while (at < got_len && at < elen && got[at] == expected[at]) at++;
    CHECK(test, got_len == elen && at == elen, "differs at byte %zu; got:\n%s", at, got);
    csv_reader_free(&r);
    free(got);
    free(buf);
    free(expected);
}

/* Records of a string as "a|b;c|d;" ("<U>" after an unterminated record). */
static void records_of(const char *s, char delim, char quote, char *out, size_t size) {
    csv_reader r;
    csv_reader_init(&r, s, strlen(s), delim, quote);
    out[0] = '\0';
    csv_result res;
    while ((res = csv_reader_next(&r)) == CSV_RECORD || res == CSV_UNTERMINATED) {
        for (int i = 0; i < r.nfields; i++) {
            if (i) strncat(out, "|", size - strlen(out) - 1);
            strncat(out, csv_field(&r, i, NULL), size - strlen(out) - 1);
        }
        strncat(out, res == CSV_UNTERMINATED ? "<U>" : ";", size - strlen(out) - 1);
        if (res == CSV_UNTERMINATED) break;
    }
    csv_reader_free(&r);
}

static void test_reader_edges(void) {
    /* Expectations are what Python's csv.reader(io.StringIO(s, newline='')) gives. */
    static const struct {
        const char *in, *want;
        char quote;
    } cases[] = {
        {"", "", '"'},
        {"\xEF\xBB\xBF", "", '"'},
        {"a,", "a|;", '"'},
        {"a,b\rc,d", "a|b;c|d;", '"'},
        {"\"\"\n\n", ";;", '"'}, /* [''] then [] */
        {"x,\"a\"\"\"", "x|a\";", '"'},
        {"\"a\" b,c", "a b|c;", '"'},
        {"\"open", "open<U>", '"'},
        {"\"q\",r", "\"q\"|r;", 0}, /* literal quotes */
    };
    char got[256], name[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        records_of(cases[i].in, ',', cases[i].quote, got, sizeof got);
        snprintf(name, sizeof name, "csv_edge_%zu", i);
        CHECK(name, strcmp(got, cases[i].want) == 0, "got '%s', want '%s'", got, cases[i].want);
    }
    size_t bad = 99;
    CHECK("utf8_rejects_surrogate", !utf8_valid("a\xED\xA0\x80", 4, &bad) && bad == 1, "bad=%zu",
          bad);
    CHECK("utf8_rejects_truncated", !utf8_valid("ab\xE2\x82", 4, &bad) && bad == 2, "bad=%zu", bad);
    CHECK("utf8_rejects_above_max", !utf8_valid("\xF4\x90\x80\x80", 4, &bad), "accepted");
    CHECK("utf8_accepts_4byte", utf8_valid("\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF", 8, &bad),
          "rejected");
}

/* Does skip k have this line and a reason containing `why`? */
static int skip_is(const text_table *t, int64_t k, int64_t line, const char *why) {
    const text_skip *s = text_table_skipped(t, k);
    if (!s) return 0;
    if (s->line != line || !strstr(s->reason, why)) {
        printf("  skip %lld: line %lld, '%s' (%s)\n", (long long)k, (long long)s->line, s->reason,
               s->path);
        return 0;
    }
    return 1;
}

static void test_basic_csv(void) {
    text_table *t = NULL;
    graft_err e = {0};
    graft_status st = text_table_load_csv(&t, fixture("basic.csv"), NULL, &e);
    CHECK("basic_loads", st == GRAFT_OK, "%s", e.msg);
    if (st != GRAFT_OK) return;
    CHECK("basic_count", text_table_count(t) == 10, "%lld rows", (long long)text_table_count(t));
    static const char *texts[] = {"plain text",
                                  "hello, world",
                                  "she said \"hi\" twice",
                                  "line one\nline two",
                                  "crlf one\r\ncrlf two",
                                  "caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80",
                                  "ab\"cd",
                                  "abcd",
                                  " spaced ",
                                  "last good"};
    int texts_ok = text_table_count(t) == 10;
    for (int i = 0; texts_ok && i < 10; i++) texts_ok = !strcmp(text_table_text(t, i), texts[i]);
    CHECK("basic_texts", texts_ok, "a text differs");
    /* Labels are taken as they are: " pos " is its own class, sorting before the others. */
    int nc = text_table_class_count(t);
    CHECK("basic_classes",
          nc == 4 && !strcmp(text_table_class_name(t, 0), " pos ") &&
              !strcmp(text_table_class_name(t, 1), "neg") &&
              !strcmp(text_table_class_name(t, 2), "neutral") &&
              !strcmp(text_table_class_name(t, 3), "pos"),
          "%d classes", nc);
    static const int labels[] = {3, 1, 3, 2, 1, 3, 1, 1, 0, 2};
    int labels_ok = 1;
    for (int i = 0; i < 10; i++) labels_ok &= text_table_label(t, i) == labels[i];
    CHECK("basic_labels", labels_ok, "a label differs");
    CHECK("basic_no_pair", text_table_text_pair(t, 0) == NULL, "pair present");
    CHECK("basic_skip_count", text_table_skipped_count(t) == 8, "%lld skipped",
          (long long)text_table_skipped_count(t));
    CHECK("skip_too_many_fields", skip_is(t, 0, 13, "4 fields where the header has 3"),
          "see above");
    CHECK("skip_too_few_fields", skip_is(t, 1, 14, "2 fields where the header has 3"), "see above");
    CHECK("skip_invalid_utf8", skip_is(t, 2, 15, "invalid UTF-8 (byte 0xff"), "see above");
    CHECK("skip_overlong_utf8", skip_is(t, 3, 16, "invalid UTF-8 (byte 0xc0"), "see above");
    CHECK("skip_nul", skip_is(t, 4, 17, "NUL byte"), "see above");
    CHECK("skip_empty_text", skip_is(t, 5, 18, "empty text"), "see above");
    CHECK("skip_empty_label", skip_is(t, 6, 19, "empty label"), "see above");
    CHECK("skip_unterminated", skip_is(t, 7, 22, "unterminated quoted field"), "see above");
    const text_skip *s = text_table_skipped(t, 0);
    CHECK("skip_names_file", s && strstr(s->path, "basic.csv"), "path %s", s ? s->path : "-");

    /* load_like: the same classes; an unknown label is skipped. */
    text_table *v = NULL;
    st = text_table_load_like(&v, t, fixture("valid.csv"), NULL, &e);
    CHECK("like_csv_loads", st == GRAFT_OK, "%s", e.msg);
    if (st == GRAFT_OK) {
        CHECK("like_csv_rows",
              text_table_count(v) == 2 && text_table_label(v, 0) == 3 &&
                  text_table_label(v, 1) == 2 && text_table_class_count(v) == 4,
              "%lld rows", (long long)text_table_count(v));
        CHECK("like_csv_skips_unknown",
              text_table_skipped_count(v) == 1 &&
                  skip_is(v, 0, 3, "label 'positive' is not one of the 4 known classes"),
              "see above");
    }
    text_table_free(v);
    /* A folder against CSV-made classes: val/pos exists there. */
    st = text_table_load_like(&v, t, fixture("folder/val"), NULL, &e);
    CHECK("like_folder_from_csv",
          st == GRAFT_OK && text_table_count(v) == 1 && text_table_label(v, 0) == 3, "%s", e.msg);
    text_table_free(v);
    text_table_free(t);
}

static void test_pairs_tsv(void) {
    text_table_options o = TEXT_TABLE_OPTIONS_INIT;
    o.text_column = "sentence1";
    o.text_pair_column = "sentence2";
    text_table *t = NULL;
    graft_err e = {0};
    graft_status st = text_table_load_csv(&t, fixture("pairs.tsv"), &o, &e);
    CHECK("tsv_loads", st == GRAFT_OK, "%s", e.msg);
    if (st != GRAFT_OK) return;
    CHECK("tsv_rows", text_table_count(t) == 5 && text_table_class_count(t) == 3, "%lld rows",
          (long long)text_table_count(t));
    CHECK("tsv_quoted_tab",
          !strcmp(text_table_text(t, 1), "tab\tinside") &&
              !strcmp(text_table_text_pair(t, 1), "second \"quoted\" word"),
          "got '%s'", text_table_text(t, 1));
    CHECK("tsv_multiline",
          !strcmp(text_table_text(t, 3), "multi\nline") &&
              !strcmp(text_table_text(t, 4), "no newline at end") &&
              !strcmp(text_table_text_pair(t, 4), "y"),
          "got '%s'", text_table_text(t, 3));
    CHECK("tsv_labels",
          text_table_label(t, 0) == 1 && text_table_label(t, 2) == 0 && text_table_label(t, 3) == 2,
          "labels differ");
    CHECK("tsv_skip", text_table_skipped_count(t) == 1 && skip_is(t, 0, 4, "2 fields"),
          "see above");
    text_table_free(t);

    o.literal_quotes = 1; /* csv.QUOTE_NONE: lines 3 (4 fields) and 6 (1 field) break */
    st = text_table_load_csv(&t, fixture("pairs.tsv"), &o, &e);
    CHECK("tsv_literal_quotes",
          st == GRAFT_OK && text_table_count(t) == 4 && text_table_skipped_count(t) == 3 &&
              !strcmp(text_table_text(t, 2), "line\""),
          "%s", e.msg);
    text_table_free(t);

    o.text_pair_column = "nope";
    st = text_table_load_csv(&t, fixture("pairs.tsv"), &o, &e);
    CHECK("missing_column_error", st == GRAFT_E_NOT_FOUND && strstr(e.msg, "'nope'") && !t,
          "status %d: %s", st, e.msg);
}

static void test_multi_label(void) {
    text_table_options o = TEXT_TABLE_OPTIONS_INIT;
    o.label_column = "tags";
    o.label_mode = TEXT_LABEL_MULTI;
    text_table *t = NULL;
    graft_err e = {0};
    graft_status st = text_table_load_csv(&t, fixture("multi.csv"), &o, &e);
    CHECK("multi_error_without_separator", st == GRAFT_E_INVALID_ARGUMENT, "status %d", st);
    o.label_separator = '|';
    st = text_table_load_csv(&t, fixture("multi.csv"), &o, &e);
    CHECK("multi_loads", st == GRAFT_OK, "%s", e.msg);
    if (st != GRAFT_OK) return;
    static const char *names[] = {"economy", "politics", "sports", "weather"};
    int ok = text_table_count(t) == 5 && text_table_class_count(t) == 4;
    for (int c = 0; ok && c < 4; c++) ok = !strcmp(text_table_class_name(t, c), names[c]);
    CHECK("multi_classes_trimmed_sorted", ok, "%d classes", text_table_class_count(t));
    static const float want[5][4] = {
        {0, 1, 1, 0}, {1, 0, 1, 0}, {0, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 0, 1}};
    float v[4];
    for (int i = 0; ok && i < 5; i++) {
        text_table_label_vector(t, i, v);
        ok = !memcmp(v, want[i], sizeof v);
    }
    CHECK("multi_vectors", ok, "a vector differs");
    int n;
    const int32_t *idx = text_table_label_indices(t, 0, &n);
    CHECK("multi_indices", n == 2 && idx[0] == 1 && idx[1] == 2 && text_table_label(t, 0) == -1,
          "n=%d", n);
    CHECK("multi_no_skips", text_table_skipped_count(t) == 0, "%lld",
          (long long)text_table_skipped_count(t));
    text_table_free(t);
}

static void test_regression(void) {
    text_table_options o = TEXT_TABLE_OPTIONS_INIT;
    o.label_column = "score";
    o.label_mode = TEXT_LABEL_REGRESSION;
    text_table *t = NULL;
    graft_err e = {0};
    graft_status st = text_table_load_csv(&t, fixture("regress.tsv"), &o, &e);
    CHECK("regress_loads", st == GRAFT_OK, "%s", e.msg);
    if (st != GRAFT_OK) return;
    CHECK("regress_rows",
          text_table_count(t) == 4 && text_table_class_count(t) == 0 &&
              text_table_target(t, 0) == 1.5 && text_table_target(t, 1) == -2000 &&
              text_table_target(t, 2) == 3 && text_table_target(t, 3) == 0.25 &&
              !strcmp(text_table_text(t, 3), "seven"),
          "%lld rows", (long long)text_table_count(t));
    CHECK("regress_skips",
          text_table_skipped_count(t) == 4 &&
              skip_is(t, 0, 5, "label 'abc' is not a finite number") &&
              skip_is(t, 1, 6, "'nan' is not a finite number") &&
              skip_is(t, 2, 7, "'' is not a finite number") &&
              skip_is(t, 3, 9, "'1e400' is not a finite number"),
          "see above");
    text_table_free(t);
}

static void test_folders(void) {
    text_table *t = NULL, *v = NULL;
    graft_err e = {0};
    graft_status st = text_table_load_folder(&t, fixture("folder/train"), NULL, &e);
    CHECK("folder_loads", st == GRAFT_OK, "%s", e.msg);
    if (st != GRAFT_OK) return;
    CHECK("folder_rows",
          text_table_count(t) == 3 && text_table_class_count(t) == 2 &&
              !strcmp(text_table_class_name(t, 0), "neg") &&
              !strcmp(text_table_text(t, 0), "dull\r\nand slow") &&
              !strcmp(text_table_text(t, 1), "great movie\n") &&
              !strcmp(text_table_text(t, 2), "loved it") && text_table_label(t, 0) == 0 &&
              text_table_label(t, 2) == 1,
          "%lld rows", (long long)text_table_count(t));
    CHECK("folder_skips",
          text_table_skipped_count(t) == 4 && skip_is(t, 0, 0, "empty (only white space)") &&
              skip_is(t, 1, 0, "empty file") &&
              skip_is(t, 2, 0, "invalid UTF-8 (byte 0xe2 at offset 7)") &&
              skip_is(t, 3, 0, "not a .txt file"),
          "%lld skipped", (long long)text_table_skipped_count(t));
    const text_skip *s = text_table_skipped(t, 2);
    CHECK("folder_skip_path", s && strstr(s->path, "train/pos/c.txt"), "path %s",
          s ? s->path : "-");

    st = text_table_load_like(&v, t, fixture("folder/val"), NULL, &e);
    CHECK("like_folder",
          st == GRAFT_OK && text_table_count(v) == 1 && text_table_label(v, 0) == 1 &&
              text_table_class_count(v) == 2,
          "%s", e.msg);
    text_table_free(v);
    v = NULL;
    st = text_table_load_like(&v, t, fixture("folder/val_unknown"), NULL, &e);
    CHECK("like_folder_unknown_class",
          st == GRAFT_E_INVALID_ARGUMENT && !v && strstr(e.msg, "'meh'"), "status %d: %s", st,
          e.msg);
    text_table_free(t);
    t = NULL;

    st = text_table_load_folder(&t, fixture("folder/empty_class"), NULL, &e);
    CHECK("folder_empty_class_error",
          st == GRAFT_E_INVALID_ARGUMENT && !t &&
              strstr(e.msg, "empty_class/b: empty class folder"),
          "status %d: %s", st, e.msg);
    st = text_table_load(&t, fixture("folder/train"), NULL, &e);
    CHECK("load_dispatches_folder", st == GRAFT_OK && text_table_count(t) == 3, "%s", e.msg);
    text_table_free(t);
}

/* A class folder holding a link to nowhere: a dangling link, skipped with its target. */
static void test_unreadable(void) {
    char tmpl[] = "/tmp/graft_text_XXXXXX";
    if (!mkdtemp(tmpl)) {
        SKIP("folder_unreadable_file", "no temporary folder");
        return;
    }
    char cls[128], good[160], link[160];
    snprintf(cls, sizeof cls, "%s/c", tmpl);
    snprintf(good, sizeof good, "%s/ok.txt", cls);
    snprintf(link, sizeof link, "%s/gone.txt", cls);
    mkdir(cls, 0700);
    FILE *f = fopen(good, "wb");
    if (f) fputs("fine", f), fclose(f);
    int linked = symlink("/nonexistent/graft/file.txt", link) == 0;
    text_table *t = NULL;
    graft_err e = {0};
    graft_status st = text_table_load_folder(&t, tmpl, NULL, &e);
    if (!linked)
        SKIP("folder_unreadable_file", "cannot make a symbolic link");
    else
        CHECK("folder_unreadable_file",
              st == GRAFT_OK && text_table_count(t) == 1 && text_table_skipped_count(t) == 1 &&
                  skip_is(t, 0, 0, "dangling link (to '/nonexistent/graft/file.txt'"),
              "status %d: %s", st, e.msg);
    text_table_free(t);
    unlink(link);
    unlink(good);
    rmdir(cls);
    rmdir(tmpl);
}

static void test_errors(void) {
    text_table *t = NULL;
    graft_err e = {0};
    graft_status st = text_table_load_csv(&t, fixture("folder/train/pos/a.txt"), NULL, &e);
    CHECK("error_extension", st == GRAFT_E_INVALID_ARGUMENT && !t && strstr(e.msg, "a.txt"),
          "status %d: %s", st, e.msg);
    st = text_table_load_csv(&t, fixture("missing.csv"), NULL, &e);
    CHECK("error_missing_file", st == GRAFT_E_IO && strstr(e.msg, "missing.csv"), "status %d: %s",
          st, e.msg);
    st = text_table_load_folder(&t, fixture("no_such_folder"), NULL, &e);
    CHECK("error_missing_folder", st == GRAFT_E_IO, "status %d: %s", st, e.msg);
    text_table_free(NULL);
}

int main(int argc, char **argv) {
    dir = argc > 1 ? argv[1] : "tests/data/text";
    test_reference("basic.csv", ',');
    test_reference("pairs.tsv", '\t');
    test_reference("multi.csv", ',');
    test_reference("regress.tsv", '\t');
    test_reference("valid.csv", ',');
    test_reader_edges();
    test_basic_csv();
    test_pairs_tsv();
    test_multi_label();
    test_regression();
    test_folders();
    test_unreadable();
    test_errors();
    return test_failures ? 1 : 0;
}
