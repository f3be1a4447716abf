/* The image source's GPU decode path (source_images.c): a loader with
 * decode gpu or auto hands the source a GPU decoder (data/gpu_decode.h);
 * the source then fills whole batches (pl_dataset_vt.read_batch), each
 * one's JPEGs split between the calling worker and the GPU as
 * data/decode_split.h says. Per-sample reads (ds[i]) stay on the CPU. */
#ifndef PL_IMAGES_GPU_H
#define PL_IMAGES_GPU_H

#include "data/dataset.h"
#include "data/decode_split.h"
#include "data/gpu_decode.h"

/* Whether ds is an image folder (pl_dataset_open_images). */
int pl_images_is(const pl_dataset *ds);

/* A dataset for one loader: image folder ds (retained) read with the GPU
 * path dec (owned from now on, even on failure) in mode PL_DECODE_GPU or
 * PL_DECODE_AUTO. Its samples, fields and per-sample reads are ds's; it
 * reads whole batches. ds itself is not changed. */
pl_status pl_images_gpu_view(pl_dataset *ds, pl_gpu_decoder *dec, int mode,
                             pl_dataset **out, pl_error *err);

/* 1 when ds is a GPU view whose GPU path turned off after an error, its
 * message in why[0..n). */
int pl_images_gpu_off(const pl_dataset *ds, char *why, size_t n);

/* The split's counts; 0 (and *out zeroed) when ds is no GPU view. */
int pl_images_decode_counts(const pl_dataset *ds, pl_decode_counts *out);

#endif /* PL_IMAGES_GPU_H */
