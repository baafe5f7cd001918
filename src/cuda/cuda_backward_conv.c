/* cuda_backward_conv.c: (in progress) */
#include "cuda_backward.h"
graft_status cuda_bwd_conv(const cuda_bwd *b, bool *handled) { (void)b; *handled = false; return GRAFT_OK; }
graft_status cuda_bwd_pool(const cuda_bwd *b, bool *handled) { (void)b; *handled = false; return GRAFT_OK; }
graft_status cuda_bwd_batchnorm(const cuda_bwd *b, bool *handled) { (void)b; *handled = false; return GRAFT_OK; }
