/* dnnl_common.c: oneDNN engine and stream, per-node state and error mapping (being written). */
#include "graft_config.h"
#include "cpu_backend.h"

graft_status dnnl_backend_init(cpu_backend *be, graft_err *e) { (void)e; be->dnnl_engine = NULL; be->dnnl_stream = NULL; return GRAFT_OK; }
void dnnl_backend_fini(cpu_backend *be) { (void)be; }
void dnnl_free_state(void *state) { (void)state; }
