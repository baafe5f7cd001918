#!/usr/bin/env python3
"""make_text_fixtures.py: writes the CSV/TSV/folder fixtures of tests/test_text_table.c and
records Python's csv-module parse of each CSV/TSV fixture into <fixture>.expected.

Usage: python3 tools/make_text_fixtures.py [OUT_DIR]   (default tests/data/text)

Expected-file format, one line per record csv.reader yields (blank lines included, as []):
  START_LINE <tab> ok|unterminated <tab> NFIELDS [<tab> FIELD]...
START_LINE is the 1-based line the record starts on (previous reader.line_num + 1). Fields are
the raw bytes (the file is read with encoding='utf-8-sig', errors='surrogateescape', newline='')
with backslash, tab, LF, CR and NUL escaped as \\\\, \\t, \\n, \\r, \\0. "unterminated" marks a
last record whose quoted field runs to the end of the file (Python's non-strict reader returns
it; strict mode raises "unexpected end of data"; graft's reader reports it).
"""
import csv
import io
import os
import sys

BOM = b"\xef\xbb\xbf"

# BOM, CRLF line ends, quoted commas, doubled quotes, embedded LF and CRLF, an empty line,
# Python's non-strict quirks, then bad rows: wrong field counts, invalid UTF-8, NUL, empty text
# and label, and an unterminated quote at the end.
BASIC_CSV = BOM + b"".join([
    b"id,text,label\r\n",
    b"1,plain text,pos\r\n",
    b'2,"hello, world",neg\r\n',
    b'3,"she said ""hi"" twice",pos\r\n',
    b'4,"line one\nline two",neutral\r\n',
    b'5,"crlf one\r\ncrlf two",neg\r\n',
    b"\r\n",
    b'6,caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80,pos\r\n',
    b'7,ab"cd,neg\r\n',
    b'8,"ab"cd,neg\r\n',
    b"9,too,many,fields\r\n",
    b"10,too few\r\n",
    b"11,bad \xff\xfe bytes,pos\r\n",
    b"12,overlong \xc0\xaf,pos\r\n",
    b"13,nul \x00 byte,pos\r\n",
    b"14,,neg\r\n",
    b"15,no label,\r\n",
    b' 16 ," spaced" , pos \r\n',
    b"17,last good,neutral\r\n",
    b'18,"never closed,pos\r\n',
    b"19,swallowed,neg\r\n",
])

# Tab-separated pairs, LF line ends, no BOM; quotes are honoured as Python's csv does.
PAIRS_TSV = b"".join([
    b"sentence1\tsentence2\tlabel\n",
    b"A man sleeps.\tA person rests.\tentailment\n",
    b'"tab\tinside"\tsecond "quoted" word\tneutral\n',
    b"only two\tfields\n",
    b"It rains.\tIt is dry.\tcontradiction\n",
    b'"multi\nline"\tx\tneutral\n',
    b"no newline at end\ty\tentailment",
])

MULTI_CSV = b"".join([
    b"text,tags\n",
    b"a,sports|politics\n",
    b'b," economy | sports "\n',
    b"c,\n",
    b"d,politics|politics||\n",
    b"e,weather\n",
])

REGRESS_TSV = b"".join([
    b"text\tscore\n",
    b"one\t1.5\n",
    b"two\t-2e3\n",
    b"three\t 3 \n",
    b"four\tabc\n",
    b"five\tnan\n",
    b"six\t\n",
    b"seven\t.25\n",
    b"eight\t1e400\n",
])

# For load_like against BASIC_CSV's classes (neg, neutral, pos).
VALID_CSV = b"".join([
    b"text,label\n",
    b"good,pos\n",
    b"strange,positive\n",
    b"fine,neutral\n",
])

FOLDERS = {
    # train: a BOM file, an invalid UTF-8 file, an empty file, a white-space file, a non-.txt
    # file, a hidden file, and a file directly in the root (ignored).
    "folder/train/pos/a.txt": b"great movie\n",
    "folder/train/pos/b.txt": BOM + b"loved it",
    "folder/train/pos/c.txt": b"broken \xe2\x82 bytes",
    "folder/train/pos/notes.md": b"not a sample",
    "folder/train/pos/.hidden.txt": b"passed over",
    "folder/train/neg/a.txt": b"dull\r\nand slow",
    "folder/train/neg/empty.txt": b"",
    "folder/train/neg/blank.TXT": b" \n\t\n",
    "folder/train/README": b"a file in the root: ignored",
    # empty_class: b has only a hidden file, so no .txt: an error.
    "folder/empty_class/a/1.txt": b"one",
    "folder/empty_class/b/.gitkeep": b"",
    # val matches train's classes (only pos); val_unknown has a class train lacks.
    "folder/val/pos/x.txt": b"fine film",
    "folder/val_unknown/pos/x.txt": b"fine film",
    "folder/val_unknown/meh/y.txt": b"so-so",
}

CSV_FILES = {
    "basic.csv": (BASIC_CSV, ","),
    "pairs.tsv": (PAIRS_TSV, "\t"),
    "multi.csv": (MULTI_CSV, ","),
    "regress.tsv": (REGRESS_TSV, "\t"),
    "valid.csv": (VALID_CSV, ","),
}


def escape(field):
    raw = field.encode("utf-8", "surrogateescape")
    out = raw.replace(b"\\", b"\\\\").replace(b"\t", b"\\t").replace(b"\n", b"\\n")
    return out.replace(b"\r", b"\\r").replace(b"\x00", b"\\0")


def ends_unterminated(text, delimiter):
    try:
        list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True))
    except csv.Error as err:
        return "unexpected end of data" in str(err)
    return False


def python_parse(data, delimiter):
    """Records of csv.reader as (start_line, status, fields)."""
    text = data.decode("utf-8-sig", "surrogateescape")
    lines = io.StringIO(text, newline="").readlines()
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    records, prev = [], 0
    for row in reader:
        records.append([prev + 1, "ok", row])
        prev = reader.line_num
    if records:
        last = records[-1]
        if ends_unterminated("".join(lines[last[0] - 1:]), delimiter):
            last[1] = "unterminated"
    return records


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join("tests", "data", "text")
    for rel, data in FOLDERS.items():
        path = os.path.join(out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    for name, (data, delimiter) in CSV_FILES.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        lines = []
        for start, status, row in python_parse(data, delimiter):
            head = f"{start}\t{status}\t{len(row)}".encode()
            lines.append(b"\t".join([head] + [escape(x) for x in row]))
        with open(os.path.join(out, name + ".expected"), "wb") as f:
            f.write(b"\n".join(lines) + b"\n")
    print(f"wrote fixtures to {out}")


if __name__ == "__main__":
    main()
