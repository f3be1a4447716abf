/* The source registry (registry.h): one row per source that a kind name
 * opens. To add a source: write its file with its opener, add its row
 * here and the opener's prototype in registry.h. */
#include "data/sources/registry.h"

#include <stdio.h>
#include <string.h>

/* flip and dct in images: the deprecated spellings of flip_p and
 * dct_scaling (the names of pl_image_options and of Python's
 * ImageFolder), still taken. */
static const pl_source_row rows[] = {
    {{"idx", "idx:IMAGES,LABELS", "",
      "MNIST-style IDX image and label files, raw or .gz"},
     pl_source_open_idx},
    {{"cifar10", "cifar10:FILE[,FILE...]", "",
      "CIFAR-10 binary batches (data_batch_N.bin)"},
     pl_source_open_cifar10},
    {{"tokens", "tokens:FILE[,FILE...]?context=T",
      "context samples stride dtype format",
      "token files cut into windows of context+1 tokens"},
     pl_source_open_tokens},
    {{"npy", "npy:FILE[,FILE...]", "",
      "NumPy .npy arrays (one field each) or one .npz"},
     pl_source_open_npy},
    {{"images", "images:ROOT",
      "size train scale ratio flip_p resize dct_scaling crop_field on_error "
      "flip dct",
      "an ImageFolder tree or a list file of JPEG/PNG images"},
     pl_source_open_images},
    {{"shards", "shards:TAR|URL|PATTERN[,...]?fields=image:jpg,label:cls",
      PL_SHARDS_KEYS, "WebDataset tar shards, local or over HTTP(S)"},
     pl_source_open_shards},
};

#define NROWS ((int)(sizeof rows / sizeof rows[0]))

const pl_source_info *pl_source_at(int i) {
  return i >= 0 && i < NROWS ? &rows[i].info : NULL;
}

const pl_source_row *pl_source_find(const char *kind) {
  for (int i = 0; i < NROWS; i++)
    if (!strcmp(rows[i].info.kind, kind))
      return &rows[i];
  return NULL;
}

const char *pl_source_want(char *buf, size_t n) {
  size_t used = (size_t)snprintf(buf, n, "(want");
  for (int i = 0; i < NROWS && used < n; i++)
    used += (size_t)snprintf(buf + used, n - used, "%s%s",
                             !i               ? " "
                             : i == NROWS - 1 ? " or "
                                              : ", ",
                             rows[i].info.usage);
  if (used < n)
    snprintf(buf + used, n - used, ")");
  return buf;
}
