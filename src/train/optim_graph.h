/* optim_graph.h: the trainer's optimizer step as a graph of one OptimizerStep node
 * (src/ops/optimizer_step.h) run by graph/exec: fp16's unscale, check and scaler update, clipping
 * by the global norm and the update of every parameter in one op, whose CPU kernel has optim.c's
 * formulas and whose CUDA kernel keeps everything on the device. */
#ifndef GRAFT_TRAIN_OPTIM_GRAPH_H
#define GRAFT_TRAIN_OPTIM_GRAPH_H

#include "loss_scale.h"
#include "optim.h"
#include "train_exec.h"
#include "train_state.h"

typedef struct optim_graph {
    ir_graph g;
    train_exec run;
    tensor *inputs; /* per graph input: state, hyper, then per parameter w, g, s0, s1, s2 */
    int n_params;
    train_state state; /* the op's state input (host runs) */
    float hyper[2];    /* lr, momentum or beta1 */
    bool on_device;    /* state, weights, gradients and moments live in device memory */
    void **dev;        /* per graph input on the device: its buffer (hyper: NULL) */
    int *first_input;  /* per parameter: the graph input of its weights (then its gradient) */
    bool ready;
} optim_graph;

/* The step over opt's parameters (their data, gradients and state buffers bound, not copied),
 * on a CPU backend of its own. fp16: with the loss scaler's unscale, check and update; max_norm
 * > 0: clip by the global norm. threads: the CPU's (0: default). */
graft_status optim_graph_init(optim_graph *og, const optim *opt, bool fp16, float max_norm,
                              int threads, graft_err *e);
/* The same on a device ("cuda:0"; NULL or "cpu": as optim_graph_init): the state, weights,
 * gradients and moments get device buffers of their own, resident between steps; fill them with
 * optim_graph_upload and read them back with optim_graph_download. */
graft_status optim_graph_init_on(optim_graph *og, const optim *opt, bool fp16, float max_norm,
                                 const char *device, int threads, graft_err *e);
/* The same on the device model m runs on (the CPU when m does). */
graft_status optim_graph_init_model(optim_graph *og, const optim *opt, bool fp16, float max_norm,
                                    graft_model *m, int threads, graft_err *e);
void optim_graph_free(optim_graph *og);
/* What optim_graph_move moves: weights, gradients, state slots, the training state. */
enum { OG_W = 1, OG_G = 2, OG_S = 4, OG_STATE = 8 };
/* Device runs: parameters [lo, hi)'s buffers that `what` names to the device (up) or back, and
 * with OG_STATE og->state (down: read it there for the scaler and the step count). */
graft_status optim_graph_move(optim_graph *og, const optim *opt, bool up, int what, int lo, int hi,
                              graft_err *e);
/* Device runs: parameter i's device buffer of its weights (OG_W) or gradient (OG_G). */
void *optim_graph_device_buffer(const optim_graph *og, int param, int what);
/* Device runs: opt's weights, gradients and state buffers, its step count and the scaler (NULL:
 * PyTorch's default) to the device; and back (the gradients stay). */
graft_status optim_graph_upload(optim_graph *og, const optim *opt, const loss_scaler *scaler,
                                graft_err *e);
graft_status optim_graph_download(optim_graph *og, optim *opt, loss_scaler *scaler,
                                  int64_t *skipped, graft_err *e);
/* og->state (the last host run's, or the last one moved down with OG_STATE) into opt's step
 * count and the scaler's scale and growth tracker (scaler NULL: not). */
void optim_graph_state_to(const optim_graph *og, optim *opt, loss_scaler *scaler);
/* Device runs: opt's gradients alone to the device (tests feed host gradients this way). */
graft_status optim_graph_upload_grads(optim_graph *og, const optim *opt, graft_err *e);

/* One step at rate lr with opt's current momentum (beta1): the parameters updated and their
 * gradients zeroed; opt's step count and the scaler (fp16) advanced as optim_step and
 * loss_scale_update advance them (on a device: the device's copies, scaler unused). *skipped: an
 * inf/NaN gradient skipped the step (fp16); *total_norm: the norm before clipping (0 without
 * clipping). */
graft_status optim_graph_step(optim_graph *og, optim *opt, float lr, loss_scaler *scaler,
                              bool *skipped, float *total_norm, graft_err *e);

#endif
