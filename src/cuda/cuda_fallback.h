/* cuda_fallback.h: running one node's CPU reference kernel on host copies of its tensors. */
#ifndef GRAFT_CUDA_FALLBACK_H
#define GRAFT_CUDA_FALLBACK_H

#include "cuda_internal.h"

/* Copies the device inputs to the host, runs the op's reference kernel, copies the outputs back
 * into the call's device buffers. Correct for every op graft knows, and slow. */
graft_status cuda_run_on_cpu(cuda_backend *be, const op_call *call);

#endif
