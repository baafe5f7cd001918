/* csv.h: a CSV/TSV record reader over a buffer, parsing as Python's csv module does by default. */
#ifndef GRAFT_DATA_CSV_H
#define GRAFT_DATA_CSV_H

#include <stddef.h>
#include <stdint.h>

/* Splits a buffer into records the way Python's csv.reader does with the default ("excel")
 * dialect and only the delimiter changed, reading a file opened with newline='' and
 * encoding='utf-8-sig':
 *  - a leading UTF-8 byte-order mark is skipped;
 *  - records end at "\n", "\r\n" or a lone "\r"; an empty line is a record with no fields;
 *  - a field that starts with the quote character is quoted: delimiters and line ends inside it
 *    are data (kept as they are, "\r\n" included), and a doubled quote stands for one quote;
 *  - a quote inside an unquoted field is an ordinary character; characters after a closing quote
 *    are appended to the field (Python's non-strict mode: "ab"cd reads as abcd);
 *  - spaces are kept (no skipinitialspace); there is no escape character and no field size limit.
 * quote = 0 makes quotes ordinary characters everywhere (csv.QUOTE_NONE). The one departure from
 * Python: where the buffer ends inside a quoted field, Python's non-strict reader returns what it
 * has; this reader returns CSV_UNTERMINATED for that record instead. Bytes are not decoded: the
 * caller checks UTF-8 over [raw_begin, raw_end). Fields may hold NUL bytes (see field_len). */
typedef struct csv_reader {
    const char *buf;
    size_t len, pos;
    char delim, quote;
    int64_t line;  /* 1-based line of the byte at pos */
    char *scratch; /* the current record's fields, unescaped, each followed by a NUL */
    size_t scratch_len, scratch_cap;
    size_t *field_off, *field_len; /* (fields_cap) offsets into scratch and lengths */
    int nfields, fields_cap;
    /* The current record: the line it starts on and its bytes in buf (line end excluded). */
    int64_t record_line;
    size_t raw_begin, raw_end;
} csv_reader;

typedef enum csv_result {
    CSV_RECORD = 1,        /* a record was read (nfields may be 0 for an empty line) */
    CSV_END = 0,           /* no more records */
    CSV_UNTERMINATED = -1, /* a quoted field runs to the end of the buffer; fields are partial */
    CSV_NO_MEMORY = -2
} csv_result;

/* The reader borrows buf (len bytes) until csv_reader_free. */
void csv_reader_init(csv_reader *r, const char *buf, size_t len, char delim, char quote);
csv_result csv_reader_next(csv_reader *r);
/* Field i of the current record as a NUL-terminated string; *len (may be NULL) gets its length. */
const char *csv_field(const csv_reader *r, int i, size_t *len);
void csv_reader_free(csv_reader *r);

/* 1 when the n bytes are well-formed UTF-8 as Python's decoder accepts it (no overlong forms,
 * no surrogates, nothing above U+10FFFF); *bad_offset gets the first bad byte's offset. */
int utf8_valid(const char *s, size_t n, size_t *bad_offset);

#endif
