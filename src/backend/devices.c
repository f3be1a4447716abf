/* The public questions about devices (pinloader.h), answered by the
 * backends. */
#include "backend/backend.h"

int pl_cuda_available(void) { return pl_backend_cuda_built(); }
int pl_cuda_device_count(void) { return pl_backend_cuda_device_count(); }
