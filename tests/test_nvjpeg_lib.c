/* nvJPEG opened at run time (backend/cuda/nvjpeg_lib.c), with no GPU: a
 * missing library is an error that names every path tried and what to
 * install; a real one (the nvidia-nvjpeg wheel's, which
 * scripts/nvjpeg-bundle.sh puts in .data/nvjpeg/: PL_TEST_NVJPEG_LIB)
 * resolves every entry point nvjpeg_api.h declares. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PL_HAVE_CUDA
int main(void) {
  printf("test_nvjpeg_lib: built without CUDA, skipped\n");
  return 77;
}
#else
#include "backend/cuda/nvjpeg_lib.h"

static void test_missing(void) {
  setenv("PL_NVJPEG_LIB", "/nonexistent/libnvjpeg.so.13", 1);
  pl_nvjpeg_lib lib;
  pl_error err;
  pl_status s = pl_nvjpeg_lib_open(&lib, "/nowheel", &err);
  if (s == PL_OK) { /* the toolkit's, on the library path */
    printf("test_nvjpeg_lib: found %s on the library path\n", lib.path);
    CHECK(strcmp(lib.path, "libnvjpeg.so.13") == 0 ||
          strcmp(lib.path, "libnvjpeg.so") == 0);
    pl_nvjpeg_lib_close(&lib);
    return;
  }
  CHECK_EQ_U64(s, PL_UNSUPPORTED);
  const char *want = "nvJPEG not found: tried /nonexistent/libnvjpeg.so.13 "
                     "(cannot open shared object file: No such file or "
                     "directory); ";
  CHECK(!strncmp(err.message, want, strlen(want)));
  CHECK(strstr(err.message, "; /nowheel/libnvjpeg.so.13 (") != NULL);
  CHECK(strstr(err.message, "; libnvjpeg.so.13 (") != NULL);
  CHECK(strstr(err.message, "pip install nvidia-nvjpeg") != NULL);
  CHECK(lib.dl == NULL);
}

static void test_real(const char *path) {
  setenv("PL_NVJPEG_LIB", path, 1);
  pl_nvjpeg_lib lib;
  pl_error err;
  CHECK_OK(pl_nvjpeg_lib_open(&lib, NULL, &err), &err);
  CHECK(!strcmp(lib.path, path));
  CHECK(lib.nvjpegCreateEx && lib.nvjpegDecodeBatchedEx &&
        lib.nvjpegDecodeParamsSetROI && lib.nvjpegDestroy);
  pl_nvjpeg_lib_close(&lib);
  CHECK(lib.dl == NULL);
}

int main(void) {
  CHECK(!strcmp(pl_nvjpeg_status_name(PL_NVJPEG_STATUS_BAD_JPEG),
                "NVJPEG_STATUS_BAD_JPEG"));
  CHECK(!strcmp(pl_nvjpeg_status_name((pl_nvjpeg_status)99),
                "NVJPEG_STATUS_?"));
  test_missing();
  const char *real = getenv("PL_TEST_NVJPEG_LIB");
  if (real && real[0])
    test_real(real);
  else
    printf("test_nvjpeg_lib: PL_TEST_NVJPEG_LIB unset: a real library not "
           "opened\n");
  return pl_test_finish("test_nvjpeg_lib");
}
#endif
