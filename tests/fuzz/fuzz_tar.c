/* Fuzz the tar member index (data/tar_index.c): the input as a tar, and
 * as a cached index (whose loader must refuse any damage, never read out
 * of bounds); every member an index returns must lie inside the input. */
#include "fuzz_common.h"
#include "data/tar_index.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const pl_tar_index *ix, uint64_t size) {
  for (uint64_t m = 0; m < ix->nmembers; m++) {
    if (ix->members[m].offset > size ||
        ix->members[m].size > size - ix->members[m].offset)
      abort();
    (void)strlen(pl_tar_key(ix, m));
    (void)strlen(pl_tar_ext(ix, m));
  }
  for (uint64_t i = 0; i < ix->nsamples; i++)
    if (ix->first[i] >= ix->first[i + 1] || ix->first[i + 1] > ix->nmembers)
      abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pl_tar_index ix;
  pl_error err;
  if (pl_tar_index_build(data, size, "fuzz.tar", &ix, &err) == PL_OK) {
    check(&ix, size);
    uint8_t *buf;
    uint64_t len;
    pl_tar_index back;
    if (pl_tar_index_save(&ix, "t", &buf, &len, &err) == PL_OK) {
      if (pl_tar_index_load(buf, len, "t", &back, &err) != PL_OK)
        abort(); /* a saved index always loads */
      pl_tar_index_free(&back);
      free(buf);
    }
    pl_tar_index_free(&ix);
  }
  /* the input as a cache file with the tag "t" */
  if (pl_tar_index_load(data, size, "t", &ix, &err) == PL_OK) {
    pl_tar_index_free(&ix);
  }
  return 0;
}
