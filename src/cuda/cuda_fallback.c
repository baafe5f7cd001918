/* cuda_fallback.c: runs a node's CPU reference kernel on host copies of its device tensors, for
 * the cases no CUDA kernel covers. */
#include "cuda_fallback.h"

#include <stdlib.h>
#include <string.h>

#define MAX_IO 64

static graft_status download(cuda_backend *be, const tensor *src, tensor *dst, graft_err *e) {
    *dst = *src;
    dst->data = NULL;
    TRY(tensor_alloc(dst, e));
    size_t bytes = (size_t)tensor_nbytes(src);
    if (bytes)
        CUDA_TRY(e,
                 cudaMemcpyAsync(dst->data, src->data, bytes, cudaMemcpyDeviceToHost, be->stream),
                 "copying a tensor to the host for the CPU fallback");
    return GRAFT_OK;
}

graft_status cuda_run_on_cpu(cuda_backend *be, const op_call *call) {
    graft_err *e = call->err;
    const ir_node *node = call->node;
    if (call->n_in > MAX_IO || call->n_out > MAX_IO)
        return op_error(node, e, GRAFT_E_UNSUPPORTED, "too many inputs or outputs");
    tensor host_in[MAX_IO], host_out[MAX_IO];
    const tensor *in[MAX_IO];
    tensor *out[MAX_IO];
    memset(host_in, 0, sizeof host_in);
    memset(host_out, 0, sizeof host_out);
    graft_status st = GRAFT_OK;
    for (int k = 0; k < call->n_in && st == GRAFT_OK; k++) {
        in[k] = call->in[k];
        if (!call->in[k] || node_input_on_host(node, k) || op_input_data_unused(node->op_type, k))
            continue;
        st = download(be, call->in[k], &host_in[k], e);
        in[k] = &host_in[k];
    }
    for (int k = 0; k < call->n_out && st == GRAFT_OK; k++) {
        out[k] = NULL;
        if (!call->out[k]) continue;
        host_out[k] = *call->out[k];
        host_out[k].data = NULL;
        st = tensor_alloc(&host_out[k], e);
        out[k] = &host_out[k];
    }
    if (st == GRAFT_OK)
        st = cuda_fail_if(e, cudaStreamSynchronize(be->stream), "the CPU fallback's copies");
    if (st == GRAFT_OK) {
        op_call host_call = {node, in, call->n_in, out, call->n_out, e};
        st = node->op->reference(&host_call);
    }
    for (int k = 0; k < call->n_out && st == GRAFT_OK; k++) {
        size_t bytes = out[k] ? (size_t)tensor_nbytes(out[k]) : 0;
        if (bytes)
            st = cuda_fail_if(e,
                              cudaMemcpyAsync(call->out[k]->data, out[k]->data, bytes,
                                              cudaMemcpyHostToDevice, be->stream),
                              "copying the CPU fallback's output to the GPU");
    }
    /* The uploads read host buffers freed below: finish them first. */
    graft_status sync = cuda_fail_if(e, cudaStreamSynchronize(be->stream), "the CPU fallback");
    if (st == GRAFT_OK) st = sync;
    for (int k = 0; k < MAX_IO; k++) {
        tensor_release(&host_in[k]);
        tensor_release(&host_out[k]);
    }
    return st;
}
