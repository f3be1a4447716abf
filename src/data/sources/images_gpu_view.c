/* The image source's GPU decode view (images_gpu.h): a loader's own
 * dataset over an image folder that reads whole batches, each one's files
 * read first, its JPEGs split between the GPU and this worker as
 * data/decode_split.h says. When the loader's batches live on the
 * decoder's device (pl_device_dst), the GPU's crops are written straight
 * into the batch's device memory and marked so: the loader copies only
 * the CPU's samples and the small fields from staging. */
#include "data/sources/images_gpu.h"
#include "data/jpeg_probe.h"
#include "data/sources/images_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One read_batch call's working memory, pooled as the scratches are: the
 * batch's files, all read before any decode (the GPU reads its share
 * while the worker decodes the rest), and the GPU's jobs. */
typedef struct gpu_batch {
  struct gpu_batch *next;
  uint8_t *files;
  size_t used, cap;
  uint32_t n_cap;
  size_t *off, *len;    /* each sample's bytes in files */
  pl_status *rs;        /* its read's status */
  uint8_t *route;       /* ROUTE_* */
  uint32_t *gpu_of;     /* job -> sample */
  pl_gpu_job *jobs;
} gpu_batch;

enum { ROUTE_CPU = 0, ROUTE_GPU_OK, ROUTE_GPU };

/* A loader's view of an image folder with the GPU path: a dataset of its
 * own (the folder's fields and samples; its reads are the folder's) that
 * reads whole batches, so that other loaders of the folder are not
 * changed by it. */
typedef struct gpu_view {
  pl_dataset *inner; /* the folder, retained */
  pl_gpu_decoder *gpu;
  pl_decode_split split;
  pthread_mutex_t mu; /* guards free_batches */
  gpu_batch *free_batches;
} gpu_view;

static void gb_free(gpu_batch *gb) {
  if (!gb)
    return;
  free(gb->files), free(gb->off), free(gb->len), free(gb->rs);
  free(gb->route), free(gb->gpu_of), free(gb->jobs);
  free(gb);
}

static gpu_batch *gb_take(gpu_view *v) {
  pthread_mutex_lock(&v->mu);
  gpu_batch *gb = v->free_batches;
  if (gb)
    v->free_batches = gb->next;
  pthread_mutex_unlock(&v->mu);
  return gb ? gb : calloc(1, sizeof *gb);
}

static void gb_give(gpu_view *v, gpu_batch *gb) {
  if (!gb)
    return;
  pthread_mutex_lock(&v->mu);
  gb->next = v->free_batches;
  v->free_batches = gb;
  pthread_mutex_unlock(&v->mu);
}

#define GB_GROW(p, n) \
  (tmp = realloc((p), (size_t)(n) * sizeof *(p))) ? ((p) = tmp, 1) : 0

static int gb_reserve(gpu_batch *gb, uint32_t n) {
  void *tmp;
  if (n <= gb->n_cap)
    return 1;
  if (!(GB_GROW(gb->off, n)) || !(GB_GROW(gb->len, n)) ||
      !(GB_GROW(gb->rs, n)) || !(GB_GROW(gb->route, n)) ||
      !(GB_GROW(gb->gpu_of, n)) || !(GB_GROW(gb->jobs, n)))
    return 0;
  gb->n_cap = n;
  return 1;
}

/* Appends sample i's file to gb->files. */
static pl_status gb_read(gpu_batch *gb, uint32_t i, const char *path,
                         pl_error *err) {
  int fd;
  size_t size;
  PL_TRY(pl_images_open(path, &fd, &size, err));
  if (gb->used + size > gb->cap) {
    size_t cap = PL_MAX(gb->cap * 2, gb->used + size + (1u << 20));
    uint8_t *f = realloc(gb->files, cap);
    if (!f) {
      close(fd);
      return pl_errorf(err, PL_NO_MEMORY, "%s: out of memory", path);
    }
    gb->files = f, gb->cap = cap;
  }
  PL_TRY(pl_images_read_all(fd, path, gb->files + gb->used, size, err));
  gb->off[i] = gb->used, gb->len[i] = size;
  gb->used += size;
  return PL_OK;
}

/* Sample i's field pointers in the batch. */
static void sample_dst(const pl_dataset *ds, const pl_batch_dst *dst,
                       uint32_t i, void **out) {
  for (int f = 0; f < ds->nfields && f < 3; f++)
    out[f] = (uint8_t *)dst->base[f] + (uint64_t)i * ds->field_bytes[f];
}

/* The CPU path for sample i: from the bytes read, else (a failed read or
 * decode) as a per-sample read does it, replacement and error alike. */
static pl_status cpu_sample(images_impl *im, uint64_t index,
                            const pl_sample_ctx *ctx, pl_scratch *sc,
                            const gpu_batch *gb, uint32_t i,
                            void *const *dstv, pl_error *err) {
  if (gb->rs[i] == PL_OK &&
      pl_images_decode_one(im, index, ctx, sc, gb->files + gb->off[i],
                           gb->len[i], dstv, err) == PL_OK)
    return PL_OK;
  pl_error_clear(err);
  return pl_images_read_or_replace(im, index, ctx, sc, dstv, err);
}

/* Job j for sample i: the same draws as the CPU path's (pl_images_crop);
 * its crop into ddst (device memory) when not NULL, else the staging. */
static void plan_job(const images_impl *im, uint64_t index,
                     const pl_sample_ctx *ctx, const pl_jpeg_info *info,
                     const gpu_batch *gb, uint32_t i, void *const *dstv,
                     void *ddst, pl_gpu_job *j) {
  crop_box box;
  pl_images_crop(&im->opt, ctx, index, info->width, info->height, &box);
  const crop_box *b = &box;
  *j = (pl_gpu_job){gb->files + gb->off[i], gb->len[i], info->width,
                    info->height, b->rx, b->ry, b->rw, b->rh, b->x0, b->y0,
                    b->x1, b->y1, b->flip, dstv[0], ddst, 0};
  pl_images_put_extras(im, index, b, dstv);
}

/* Where sample i's image goes on the device: the batch's own memory, when
 * the loader offers it on the decoder's device; else NULL (staging). */
static void *device_image(const pl_dataset *ds, const pl_device_dst *dev,
                          const pl_gpu_decoder *gpu, uint32_t i) {
  if (!dev || dev->device != gpu->device || !dev->base[0])
    return NULL;
  return (uint8_t *)dev->base[0] + (uint64_t)i * ds->field_bytes[0];
}

/* Reads every file, and marks the JPEGs the GPU path takes. */
static uint32_t read_all_files(const images_impl *im, gpu_view *v,
                               const uint64_t *idx,
                               uint32_t n, const pl_batch_dst *dst,
                               gpu_batch *gb) {
  gb->used = 0;
  for (uint32_t i = 0; i < n; i++) {
    pl_error e;
    if (dst->report)
      dst->report(dst, idx[i]);
    gb->route[i] = ROUTE_CPU;
    gb->rs[i] = gb_read(gb, i, im->names + im->offset[idx[i]], &e);
  }
  uint32_t cand = 0, not_gpu = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (gb->rs[i] != PL_OK)
      continue; /* the CPU path reports it */
    pl_jpeg_info info;
    pl_jpeg_probe(gb->files + gb->off[i], gb->len[i], &info);
    if (pl_jpeg_gpu_ok(&info) && info.width <= PL_IMAGE_MAX_PIXELS / info.height)
      gb->route[i] = ROUTE_GPU_OK, cand++;
    else
      not_gpu++;
  }
  if (not_gpu)
    pl_split_count_not_gpu(&v->split, not_gpu);
  return cand;
}

/* The first k GPU-able samples become jobs; returns how many. */
static uint32_t plan_jobs(const images_impl *im, const pl_dataset *ds,
                          const uint64_t *idx, uint32_t n, uint32_t k,
                          const pl_sample_ctx *ctx, const pl_batch_dst *dst,
                          const pl_device_dst *dev,
                          const pl_gpu_decoder *gpu, gpu_batch *gb) {
  uint32_t nj = 0;
  for (uint32_t i = 0; i < n && nj < k; i++) {
    if (gb->route[i] != ROUTE_GPU_OK)
      continue;
    pl_jpeg_info info;
    pl_jpeg_probe(gb->files + gb->off[i], gb->len[i], &info);
    void *dstv[3];
    sample_dst(ds, dst, i, dstv);
    gb->route[i] = ROUTE_GPU;
    gb->gpu_of[nj] = i;
    plan_job(im, idx[i], ctx, &info, gb, i, dstv,
             device_image(ds, dev, gpu, i), &gb->jobs[nj++]);
  }
  return nj;
}

static void gpu_off(gpu_view *v, const pl_error *why) {
  pl_split_turn_off(&v->split, why->message);
}

/* Every sample not on the GPU, on this thread; the first error ends it. */
static pl_status cpu_share(images_impl *im, const pl_dataset *ds,
                           const uint64_t *idx, uint32_t n,
                           const pl_sample_ctx *ctx, const pl_batch_dst *dst,
                           gpu_batch *gb, pl_scratch *sc, uint32_t *done,
                           pl_error *err) {
  for (uint32_t i = 0; i < n; i++) {
    if (gb->route[i] == ROUTE_GPU)
      continue;
    void *dstv[3];
    sample_dst(ds, dst, i, dstv);
    PL_TRY(cpu_sample(im, idx[i], ctx, sc, gb, i, dstv, err));
    ++*done;
  }
  return PL_OK;
}

/* The *nj jobs begun. Mode gpu waits for a decoder still starting; auto
 * does not: the jobs go back to this worker (*nj = 0; routed as any
 * GPU-able image left to the CPU) and are counted, so that no batch waits
 * for nvJPEG's start (up to 2 s with 16 workers on the H200). */
static pl_status gpu_begin(gpu_view *v, gpu_batch *gb, uint32_t *nj,
                           uint32_t size, const pl_device_dst *dev,
                           void **ticket, pl_error *err) {
  int wait = v->split.mode == PL_DECODE_GPU;
  PL_TRY(v->gpu->begin(v->gpu, gb->jobs, *nj, size, wait,
                       dev ? dev->events : NULL, ticket, err));
  if (*ticket)
    return PL_OK;
  for (uint32_t j = 0; j < *nj; j++)
    gb->route[gb->gpu_of[j]] = ROUTE_GPU_OK;
  pl_split_count_warming(&v->split, *nj);
  *nj = 0;
  return PL_OK;
}

/* The GPU path's own time for a batch: begin to the moment its work was
 * complete, as the decoder saw it. Timed up to the return of finish
 * instead, a GPU that ended while this thread still decoded its share
 * would look exactly as slow as the CPU share, every share would look
 * balanced, and auto would stay wherever it started (measured on the
 * H200: 23% on the GPU in auto against 2.6x the rate with all of it). */
static uint64_t gpu_path_ns(double began, double done_at, double returned) {
  double end = done_at > began && done_at < returned ? done_at : returned;
  return (uint64_t)((end - began) * 1e9);
}

/* The jobs the GPU wrote in the batch's device memory, marked for the
 * loader (not copied from staging); counted. */
static void mark_in_place(gpu_view *v, const gpu_batch *gb, uint32_t nj,
                          const pl_device_dst *dev) {
  uint32_t k = 0;
  for (uint32_t j = 0; dev && j < nj; j++)
    if (gb->jobs[j].ddst && !gb->jobs[j].failed) {
      dev->written[gb->gpu_of[j]] |= 1; /* field 0: the image */
      k++;
    }
  if (k)
    pl_split_count_in_place(&v->split, k);
}

static pl_status batch_run(gpu_view *v, const pl_dataset *ds,
                           const uint64_t *idx, uint32_t n,
                           const pl_sample_ctx *ctx, int ahead,
                           const pl_batch_dst *dst, const pl_device_dst *dev,
                           gpu_batch *gb, pl_scratch *sc, pl_error *err) {
  images_impl *im = v->inner->impl;
  uint32_t cand = read_all_files(im, v, idx, n, dst, gb);
  uint32_t k = pl_split_gpu_count(&v->split, cand);
  uint32_t nj = plan_jobs(im, ds, idx, n, k, ctx, dst, dev, v->gpu, gb);
  uint32_t ncpu = 0;
  void *ticket = NULL;
  pl_error ge;
  double t0 = pl_now();
  if (nj && gpu_begin(v, gb, &nj, im->opt.size, dev, &ticket, &ge) != PL_OK) {
    gpu_off(v, &ge);
    for (uint32_t j = 0; j < nj; j++)
      gb->jobs[j].failed = 1;
  }
  double t1 = pl_now();
  pl_status s = cpu_share(im, ds, idx, n, ctx, dst, gb, sc, &ncpu, err);
  uint64_t cpu_ns = (uint64_t)((pl_now() - t1) * 1e9);
  double done_at = 0;
  if (ticket && v->gpu->finish(v->gpu, ticket, &done_at, &ge) != PL_OK)
    gpu_off(v, &ge); /* its jobs are marked failed */
  uint64_t gpu_ns = gpu_path_ns(t0, done_at, pl_now());
  uint32_t nfail = 0;
  for (uint32_t j = 0; j < nj; j++) {
    if (!gb->jobs[j].failed)
      continue;
    nfail++;
    uint32_t i = gb->gpu_of[j];
    void *dstv[3];
    sample_dst(ds, dst, i, dstv);
    if (s == PL_OK)
      s = cpu_sample(im, idx[i], ctx, sc, gb, i, dstv, err);
  }
  if (nfail)
    pl_split_count_failed(&v->split, nfail);
  mark_in_place(v, gb, nj, dev);
  uint64_t begin_ns = nj ? (uint64_t)((t1 - t0) * 1e9) : 0;
  pl_split_observe(&v->split, ncpu, cpu_ns, nj - nfail, gpu_ns, begin_ns,
                   ahead);
  return s;
}

static pl_status images_read_batch_device(const pl_dataset *ds,
                                          const uint64_t *idx, uint32_t n,
                                          const pl_batch_info *info,
                                          const pl_batch_dst *dst,
                                          const pl_device_dst *dev,
                                          pl_error *err) {
  gpu_view *v = ds->impl;
  images_impl *im = v->inner->impl;
  /* No log hook here: read_batch has none (replacements are counted). */
  const pl_sample_ctx ctx = {info->seed, info->epoch, NULL};
  const int ahead =
      pl_split_ahead(info->ready_ahead, info->depth, info->since_wait);
  gpu_batch *gb = gb_take(v);
  pl_scratch *sc = pl_scratch_take(&im->scratch);
  pl_status s = gb && sc && gb_reserve(gb, n)
                    ? batch_run(v, ds, idx, n, &ctx, ahead, dst, dev, gb, sc,
                                err)
                    : pl_errorf(err, PL_NO_MEMORY, "images: out of memory");
  pl_scratch_give(&im->scratch, sc);
  gb_give(v, gb);
  return s;
}

static pl_status images_read_batch(const pl_dataset *ds, const uint64_t *idx,
                                   uint32_t n, const pl_batch_info *info,
                                   const pl_batch_dst *dst, pl_error *err) {
  return images_read_batch_device(ds, idx, n, info, dst, NULL, err);
}

static void view_destroy(void *p) {
  gpu_view *v = p;
  if (!v)
    return;
  while (v->free_batches) {
    gpu_batch *gb = v->free_batches;
    v->free_batches = gb->next;
    gb_free(gb);
  }
  if (v->gpu)
    v->gpu->destroy(v->gpu);
  pl_dataset_destroy(v->inner); /* drops our reference */
  pthread_mutex_destroy(&v->mu);
  free(v);
}

static pl_status view_read(const pl_dataset *ds, uint64_t index,
                           const pl_sample_ctx *ctx, void *const *dst,
                           pl_error *err) {
  const gpu_view *v = ds->impl;
  return v->inner->vt->read(v->inner, index, ctx, dst, err);
}

static uint64_t view_replaced(const pl_dataset *ds) {
  const gpu_view *v = ds->impl;
  return v->inner->vt->replaced(v->inner);
}

static const char *view_sample_path(const pl_dataset *ds, uint64_t index,
                                    int64_t *label) {
  const gpu_view *v = ds->impl;
  return v->inner->vt->sample_path(v->inner, index, label);
}

/* The GPU view (gpu_view): batches are read whole. */
static const pl_dataset_vt images_gpu_vt = {
    .kind = "images",
    .read = view_read,
    .read_batch = images_read_batch,
    .read_batch_device = images_read_batch_device,
    .replaced = view_replaced,
    .sample_path = view_sample_path,
    .destroy_impl = view_destroy,
};

pl_status pl_images_gpu_view(pl_dataset *ds, pl_gpu_decoder *dec, int mode,
                             pl_dataset **out, pl_error *err) {
  *out = NULL;
  gpu_view *v = pl_images_is(ds) ? calloc(1, sizeof *v) : NULL;
  if (!v) {
    dec->destroy(dec);
    return pl_images_is(ds)
               ? pl_errorf(err, PL_NO_MEMORY, "out of memory")
               : pl_errorf(err, PL_INVALID_ARGUMENT,
                           "GPU decode: the dataset is not an image folder");
  }
  v->inner = pl_dataset_retain(ds);
  v->gpu = dec;
  pl_split_init(&v->split, mode);
  pthread_mutex_init(&v->mu, NULL);
  pl_status s = pl_dataset_new(&images_gpu_vt, v, ds->length, ds->fields,
                               ds->nfields, out, err);
  if (s != PL_OK)
    view_destroy(v);
  return s;
}

int pl_images_gpu_off(const pl_dataset *ds, char *why, size_t n) {
  if (!ds || ds->vt != &images_gpu_vt)
    return 0;
  pl_decode_split *s = &((gpu_view *)ds->impl)->split;
  if (!atomic_load_explicit(&s->off, memory_order_acquire))
    return 0;
  snprintf(why, n, "%s", s->why);
  return 1;
}

int pl_images_decode_counts(const pl_dataset *ds, pl_decode_counts *out) {
  memset(out, 0, sizeof *out);
  if (!ds || ds->vt != &images_gpu_vt)
    return 0;
  pl_split_counts(&((gpu_view *)ds->impl)->split, out);
  return 1;
}
