/* device_registry.c: the device kinds this build has (device_kind.h). */
#include <stdlib.h>
#include <string.h>

#include "device_kind.h"
#include "graft_config.h"

#if GRAFT_HAVE_CUDA
extern const device_kind cuda_device_kind; /* src/cuda/cuda_kind.c */
#endif

static const device_kind *const kinds[] = {
#if GRAFT_HAVE_CUDA
    &cuda_device_kind,
#endif
    NULL,
};

/* Every kind graft has a backend folder for, whether this build compiled it or not. */
static const char *const known[] = {"cuda"};

const device_kind *const *device_kinds(int *n_out) {
    *n_out = (int)(sizeof kinds / sizeof kinds[0]) - 1;
    return kinds;
}

/* Whether device is name or name:... */
static bool names(const char *device, const char *name) {
    size_t n = strlen(name);
    return device && strncmp(device, name, n) == 0 && (device[n] == '\0' || device[n] == ':');
}

const device_kind *device_kind_of(const char *device) {
    for (int i = 0; kinds[i]; i++)
        if (names(device, kinds[i]->name)) return kinds[i];
    return NULL;
}

bool device_kind_known(const char *device) {
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (names(device, known[i])) return true;
    return false;
}

int device_index_of(const char *device) {
    const char *colon = strchr(device, ':');
    if (!colon) return 0;
    if (!colon[1]) return -2;
    char *end = NULL;
    long n = strtol(colon + 1, &end, 10);
    if (*end || n < 0 || n > 1024) return -2;
    return (int)n;
}
