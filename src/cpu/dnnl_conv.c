/* dnnl_conv.c: Conv through oneDNN (being written). */
#include "graft_config.h"
#include "cpu_backend.h"

graft_status dnnl_run_Conv(cpu_backend *be, const op_call *call, void **state, bool *handled) { (void)be; (void)call; (void)state; *handled = false; return GRAFT_OK; }
