/* text_pad.h: the width a batch of texts is padded to when padded to its longest text. */
#ifndef GRAFT_DATA_TEXT_PAD_H
#define GRAFT_DATA_TEXT_PAD_H

#include <stdint.h>

/* Widths are multiples of this: at most max_len / 8 shapes reach the model, so an engine that
 * plans (and on a GPU records) per input shape does so a few times, not once per batch
 * (docs/data.md, "Text padding"). */
#define TEXT_PAD_MULTIPLE 8

/* The batch's longest text (in tokens) rounded up to TEXT_PAD_MULTIPLE, at most max_len. */
static inline int64_t text_padded_width(int64_t longest, int64_t max_len) {
    int64_t w = (longest + TEXT_PAD_MULTIPLE - 1) / TEXT_PAD_MULTIPLE * TEXT_PAD_MULTIPLE;
    if (w < TEXT_PAD_MULTIPLE) w = TEXT_PAD_MULTIPLE;
    return w < max_len ? w : max_len;
}

#endif
