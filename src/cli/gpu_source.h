/* gpu_source.h: an image data set's batches decoded on the model's GPU (nvJPEG) into device
 * memory, as a graft_batch_source for the trainer (`graft finetune --decode gpu`). */
#ifndef GRAFT_CLI_GPU_SOURCE_H
#define GRAFT_CLI_GPU_SOURCE_H

#include <stdbool.h>

#include "gpu_decode.h"
#include "graft.h"

typedef struct gpu_source gpu_source;

/* A source over ds whose batches `worker` (shared by the run's sources, which are read one at a
 * time) reads and decodes on model's GPU as o says, a batch ahead, falling back to `base` (ds's
 * own source: its labels, and the CPU decoding of what nvJPEG leaves, which lists the files it
 * skips) one sample at a time. The source's inputs are device memory: run the model with
 * graft_model_set_device_io(model, 1, 0) while it is used. Its identity is base's plus
 * ";decode=nvjpeg", "+cpu" with cpu_beside (the worker's CPU threads decode a share: a feature
 * cache of its own). The decoder starts at the first read (a graft
 * without nvJPEG fails there, saying so); the caller checks first that the model is on a GPU
 * and the options take no CPU-only step (augment, grayscale). */
graft_status gpu_source_create(graft_dataset *ds, const graft_batch_source *base,
                               gpu_decode *worker, graft_model *model, const graft_image_options *o,
                               int max_batch, bool cpu_beside, gpu_source **out,
                               graft_batch_source *src);
void gpu_source_free(gpu_source *g);
/* Images decoded so far by nvJPEG, by the CPU threads beside it, and as fallbacks on the CPU. */
void gpu_source_counts(const gpu_source *g, int64_t *on_gpu, int64_t *beside, int64_t *on_cpu);

#endif
