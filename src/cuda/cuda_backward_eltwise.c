/* cuda_backward_eltwise.c: (in progress) */
#include "cuda_backward.h"
graft_status cuda_bwd_eltwise(const cuda_bwd *b, bool *handled) { (void)b; *handled = false; return GRAFT_OK; }
