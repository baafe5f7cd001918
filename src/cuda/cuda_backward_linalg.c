/* cuda_backward_linalg.c: (in progress) */
#include "cuda_backward.h"
graft_status cuda_bwd_gemm(const cuda_bwd *b, bool *handled) { (void)b; *handled = false; return GRAFT_OK; }
graft_status cuda_bwd_matmul(const cuda_bwd *b, bool *handled) { (void)b; *handled = false; return GRAFT_OK; }
