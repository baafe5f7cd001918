/* test_fixture.h: the text fixtures the trainer parity tests read (recorded offline with
 * PyTorch): lines `key n v1 ... vn` (the values over any lines) or `key s STRING`; `#` starts a
 * comment. */
#ifndef GRAFT_TEST_FIXTURE_H
#define GRAFT_TEST_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEYS 80

typedef struct fixture {
    char *keys[MAX_KEYS], *strs[MAX_KEYS];
    double *vals[MAX_KEYS];
    int64_t counts[MAX_KEYS];
    int n;
} fixture;

static int load_fixture(fixture *f, const char *path) {
    FILE *fp = fopen(path, "r");
    if (!fp) return -1;
    memset(f, 0, sizeof *f);
    char key[128], count[32];
    int c;
    while ((c = fgetc(fp)) != EOF) {
        if (c == '#' || c == '\n') {
            while (c != '\n' && c != EOF) c = fgetc(fp);
            continue;
        }
        ungetc(c, fp);
        if (fscanf(fp, "%127s %31s", key, count) != 2 || f->n == MAX_KEYS) break;
        int i = f->n++;
        f->keys[i] = strdup(key);
        if (!strcmp(count, "s")) {
            char s[512];
            if (fscanf(fp, "%511s", s) == 1) f->strs[i] = strdup(s);
            continue;
        }
        long long n = atoll(count);
        f->vals[i] = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
        for (long long k = 0; k < n; k++)
            if (fscanf(fp, "%lf", &f->vals[i][k]) != 1) break;
        f->counts[i] = n;
    }
    fclose(fp);
    return 0;
}

static void free_fixture(fixture *f) {
    for (int i = 0; i < f->n; i++) free(f->keys[i]), free(f->strs[i]), free(f->vals[i]);
}

static const double *get(const fixture *f, const char *key, int64_t want) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->keys[i], key) && f->vals[i] && (want < 0 || f->counts[i] == want))
            return f->vals[i];
    return NULL;
}

#endif
