/* dlopen of nvJPEG: see nvjpeg_lib.h. */
#include "backend/cuda/nvjpeg_lib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *pl_nvjpeg_status_name(pl_nvjpeg_status s) {
  static const char *const names[] = {
      "NVJPEG_STATUS_SUCCESS",          "NVJPEG_STATUS_NOT_INITIALIZED",
      "NVJPEG_STATUS_INVALID_PARAMETER", "NVJPEG_STATUS_BAD_JPEG",
      "NVJPEG_STATUS_JPEG_NOT_SUPPORTED", "NVJPEG_STATUS_ALLOCATOR_FAILURE",
      "NVJPEG_STATUS_EXECUTION_FAILED",  "NVJPEG_STATUS_ARCH_MISMATCH",
      "NVJPEG_STATUS_INTERNAL_ERROR",
      "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED",
      "NVJPEG_STATUS_INCOMPLETE_BITSTREAM"};
  unsigned i = (unsigned)s;
  return i < sizeof names / sizeof names[0] ? names[i] : "NVJPEG_STATUS_?";
}

/* Every entry point, or the name of the first one missing. */
static const char *lookup_all(pl_nvjpeg_lib *lib) {
#define PL_NVJPEG_SYM_(name, args)                                  \
  *(void **)&lib->name = dlsym(lib->dl, #name);                     \
  if (!lib->name)                                                   \
    return #name;
  PL_NVJPEG_FUNCS(PL_NVJPEG_SYM_)
#undef PL_NVJPEG_SYM_
  return NULL;
}

/* One candidate; on failure appends "PATH (why)" to tried. */
static int try_open(pl_nvjpeg_lib *lib, const char *path, char *tried,
                    size_t cap) {
  size_t used = strlen(tried);
  lib->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  const char *why = lib->dl ? lookup_all(lib) : dlerror();
  size_t plen = strlen(path);
  if (!lib->dl && why && !strncmp(why, path, plen) && why[plen] == ':')
    why += plen + (why[plen + 1] == ' ' ? 2 : 1); /* dlerror names it too */
  if (lib->dl && !why) {
    snprintf(lib->path, sizeof lib->path, "%s", path);
    return 1;
  }
  snprintf(tried + used, cap - used, "%s%s (%s%s)", used ? "; " : "", path,
           lib->dl ? "lacks " : "", why ? why : "?");
  if (lib->dl)
    dlclose(lib->dl);
  lib->dl = NULL;
  return 0;
}

pl_status pl_nvjpeg_lib_open(pl_nvjpeg_lib *lib, const char *wheel_dir,
                             pl_error *err) {
  memset(lib, 0, sizeof *lib);
  char tried[2048] = "", wheel[600];
  const char *env = getenv("PL_NVJPEG_LIB");
  if (env && env[0] && try_open(lib, env, tried, sizeof tried))
    return PL_OK;
  if (wheel_dir && wheel_dir[0]) {
    snprintf(wheel, sizeof wheel, "%s/libnvjpeg.so.13", wheel_dir);
    if (try_open(lib, wheel, tried, sizeof tried))
      return PL_OK;
  }
  if (try_open(lib, "libnvjpeg.so.13", tried, sizeof tried) ||
      try_open(lib, "libnvjpeg.so", tried, sizeof tried))
    return PL_OK;
  return pl_errorf(err, PL_UNSUPPORTED,
                   "nvJPEG not found: tried %s; install it (pip install "
                   "nvidia-nvjpeg, or the CUDA toolkit) or set "
                   "PL_NVJPEG_LIB to libnvjpeg.so.13",
                   tried);
}

void pl_nvjpeg_lib_close(pl_nvjpeg_lib *lib) {
  if (lib && lib->dl)
    dlclose(lib->dl);
  if (lib)
    lib->dl = NULL;
}
