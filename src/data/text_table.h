/* text_table.h: labelled text samples read from a CSV/TSV file or a DIR/<class>/<name>.txt folder.
 */
#ifndef GRAFT_DATA_TEXT_TABLE_H
#define GRAFT_DATA_TEXT_TABLE_H

#include <stdint.h>

/* Limits: a CSV/TSV table file, and one text file of a text folder (a longer one is skipped
 * with the reason; tokenization keeps at most max_len tokens anyway). */
#define TEXT_TABLE_MAX_BYTES ((size_t)4 << 30)
#define TEXT_SAMPLE_MAX_BYTES ((size_t)64 << 20)

#include "../core/error.h"

typedef enum text_label_mode {
    TEXT_LABEL_CLASS = 0,      /* one class name per sample; label = index in the sorted classes */
    TEXT_LABEL_MULTI = 1,      /* several class names split by label_separator; a 0/1 vector */
    TEXT_LABEL_REGRESSION = 2, /* a number; no classes */
    TEXT_LABEL_NONE = 3,       /* unlabelled texts (CSV/TSV only; label_column NULL) */
    TEXT_LABEL_MODE_COUNT = 4
} text_label_mode;

/* Initialise with TEXT_TABLE_OPTIONS_INIT. Folders only use label_mode (CLASS). */
typedef struct text_table_options {
    const char *text_column;      /* header name of the text column */
    const char *text_pair_column; /* NULL: single texts; else the second text of each pair */
    const char *label_column;
    text_label_mode label_mode;
    char label_separator; /* TEXT_LABEL_MULTI: splits the label field; names are trimmed of
                             ASCII spaces/tabs and empty pieces are dropped */
    int literal_quotes;   /* 1: quotes are ordinary characters (csv.QUOTE_NONE), e.g. for TSV
                             files that were written without quoting; 0: Python's default */
} text_table_options;
#define TEXT_TABLE_OPTIONS_INIT                                                                    \
    { "text", NULL, "label", TEXT_LABEL_CLASS, 0, 0 }

/* One sample that was not loaded: the file, the line its record starts on (1-based; 0 for a
 * whole file of a folder) and why. */
typedef struct text_skip {
    char *path;
    int64_t line;
    char *reason;
} text_skip;

typedef struct text_table text_table;

/* Read a .csv (comma) or .tsv (tab) file; any other extension is GRAFT_E_INVALID_ARGUMENT. The
 * records are split as Python's csv module does with its default dialect (see csv.h: quotes
 * are honoured in TSV too, unless literal_quotes), after an optional UTF-8 BOM. The first
 * record is the header and must name the text, label (and pair) columns; a file that cannot be
 * read, an empty file or a bad header is an error. Empty lines are passed over, as
 * csv.DictReader does. These records are skipped, each recorded with its line and reason, and
 * the rest loads: invalid UTF-8, a NUL byte, a field count other than the header's, a quoted
 * field left open at the end of the file, an empty text, an empty class label (CLASS mode), a
 * label that is not a finite number (REGRESSION). Classes are the distinct label names, taken
 * as they are (not trimmed: " pos " is not "pos"), sorted by byte value as Python's sorted()
 * sorts them; a multi-label field with no names is a row with no labels. A table with no rows
 * loaded is still returned (count 0). */
graft_status text_table_load_csv(text_table **out, const char *path, const text_table_options *o,
                                 graft_err *e);
/* Read DIR/<class>/<file>.txt: classes are the sub-folder names (hidden ones, starting with '.',
 * are passed over), sorted; one sample per file, files in name order, the whole file as the text
 * (a leading BOM removed). A class folder without any .txt file is an error, reported before any
 * file is read. A file that is unreadable, not valid UTF-8, holds a NUL byte or is empty (or only
 * white space), and an entry of a class folder that is not a .txt file, is skipped and recorded,
 * and so is every entry the folder walker leaves out (text_folder.h: a class folder linking to
 * DIR or to another class, a file reached twice, a dangling link, a FIFO: never opened).
 * Files directly inside DIR are ignored. o may be NULL; only TEXT_LABEL_CLASS is possible. */
graft_status text_table_load_folder(text_table **out, const char *dir, const text_table_options *o,
                                    graft_err *e);
/* A folder or a .csv/.tsv file, by what path is. */
graft_status text_table_load(text_table **out, const char *path, const text_table_options *o,
                             graft_err *e);
/* Load path (folder or file) with the classes and label mode of `like` (e.g. validation data
 * for a training table). o: the columns to read (NULL: like's options). A row whose label is
 * not one of like's classes is skipped and recorded; a class folder that like lacks is an
 * error. Classes of like that the data lacks are fine. */
graft_status text_table_load_like(text_table **out, const text_table *like, const char *path,
                                  const text_table_options *o, graft_err *e);
void text_table_free(text_table *t);

int64_t text_table_count(const text_table *t);
const char *text_table_text(const text_table *t, int64_t i);
/* The pair's second text, or NULL when the table has no pair column. */
const char *text_table_text_pair(const text_table *t, int64_t i);
/* The line row i's record starts on in its CSV/TSV file (1-based); 0 for a folder's file. */
int64_t text_table_line(const text_table *t, int64_t i);
text_label_mode text_table_label_mode(const text_table *t);
int text_table_class_count(const text_table *t); /* 0 in REGRESSION mode */
const char *text_table_class_name(const text_table *t, int c);
/* CLASS mode: the class index of row i (-1 in other modes). */
int text_table_label(const text_table *t, int64_t i);
/* REGRESSION mode: the target of row i (0 in other modes). */
double text_table_target(const text_table *t, int64_t i);
/* MULTI mode: the row's class indices, ascending and distinct (*n of them; NULL with *n = 0 when
 * none). CLASS mode gives its one index. */
const int32_t *text_table_label_indices(const text_table *t, int64_t i, int *n);
/* The row's labels as a 0/1 vector over the classes: out is (class_count). */
void text_table_label_vector(const text_table *t, int64_t i, float *out);
int64_t text_table_skipped_count(const text_table *t);
const text_skip *text_table_skipped(const text_table *t, int64_t i);

#endif
