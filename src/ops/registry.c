/* registry.c: the op table generated from ops.def, and its lookup by op type. */
#include <string.h>

#include "op.h"

static const op_def op_table[] = {
#define OP(name, family, since, until) {#name, #family, since, until, op_infer_##name, ref_##name},
#include "ops.def"
#undef OP
};

int op_count(void) {
    return (int)(sizeof op_table / sizeof op_table[0]);
}

const op_def *op_at(int index) {
    return index >= 0 && index < op_count() ? &op_table[index] : NULL;
}

const op_def *op_find(const char *op_type) {
    for (int i = 0; i < op_count(); i++)
        if (strcmp(op_table[i].name, op_type) == 0) return &op_table[i];
    return NULL;
}

bool op_is_internal(const op_def *op) {
    return op && (!strcmp(op->family, "backward") || !strcmp(op->family, "optimizer_step") ||
                  !strcmp(op->family, "train_loss"));
}
