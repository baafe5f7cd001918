/* text_inputs.h: the roles of a text model's inputs (token ids, attention mask, type ids). */
#ifndef GRAFT_GRAPH_TEXT_INPUTS_H
#define GRAFT_GRAPH_TEXT_INPUTS_H

#include "ir.h"

/* roles[GRAFT_TEXT_INPUT_*] get the value index of the input in that role, or -1. An input that
 * indexes the largest constant embedding table (Gather, axis 0) takes the ids, one indexing a
 * smaller table the type ids, one that only feeds arithmetic (the mask's Cast/Sub/Mul into the
 * attention scores, or Unsqueeze chains) the mask; names (ids, mask, type, segment) decide only
 * where the graph does not. An input without a role, two in one role, or no ids input are
 * errors naming the inputs. */
graft_status graph_text_inputs(const ir_graph *g, int roles[GRAFT_TEXT_INPUT_COUNT], graft_err *e);

#endif
