/* Image folders: torchvision's ImageFolder layout or a "PATH LABEL" list,
 * decoded (data/image_decode) and transformed (data/image_resize) in the
 * worker, per sample, into a fixed [3, size, size] uint8 image.
 *
 * Transforms follow torchvision on PIL images:
 *  - train: RandomResizedCrop(size, scale, ratio) - transforms.py
 *    get_params: ten attempts at an area share and a log-uniform aspect,
 *    w = round(sqrt(area * ratio)), h = round(sqrt(area / ratio)) (Python's
 *    round: half to even), accepted when it fits, top and left uniform;
 *    else a central crop clamped to the ratio range - then a horizontal
 *    flip with probability flip_p. Draws come from (seed, epoch, index).
 *  - eval: Resize(resize) of the shorter side (the longer side floors, as
 *    _compute_resized_output_size does), then CenterCrop(size) with
 *    round((h - size) / 2) above.
 * Both become one box in the source image resized to size x size, so only
 * the box (eval: plus the filter's reach) is decoded, at a JPEG DCT scale
 * of 1/2..1/8 when the box stays at least `size` pixels across. */
#include "data/dataset.h"
#include "core/rng.h"
#include "data/image_decode.h"
#include "data/image_resize.h"
#include "data/image_sample.h"
#include "data/jpeg_probe.h"
#include "data/sources/images_gpu.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RNG_STREAM_CROP 0x63726f70ull /* "crop" */
#define RNG_STREAM_SKIP 0x736b6970ull /* "skip" */
#define MAX_FILE_BYTES (256ull << 20)
#define MAX_DEPTH 32
#define SKIP_ATTEMPTS 16
/* The source's own scratch slots, after the decoder's. */
#define SLOT_FILE PL_DECODE_SLOTS
#define SLOT_RESIZE (PL_DECODE_SLOTS + 1) /* and the next */
_Static_assert(SLOT_RESIZE + 2 <= PL_SCRATCH_SLOTS, "scratch slots");

typedef struct images_impl {
  pl_image_options opt;
  uint64_t n;
  char *names;      /* NUL-separated paths */
  uint64_t *offset; /* n: path i at names + offset[i] */
  int64_t *label;
  atomic_uint_fast64_t replaced;
  /* Decode and resize buffers, one scratch per concurrent reader: a worker
   * takes one per sample and gives it back, so after the first samples
   * nothing of ours is allocated per image. A pool in the dataset rather
   * than worker-owned memory: any thread may read (loader workers, the
   * consumer with num_workers 0, Python's ds[i]), the loader needs no
   * hook, and destroy frees it all. */
  pl_scratch_pool scratch;
} images_impl;

void pl_image_options_init(pl_image_options *o) {
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->size = 224;
  o->train = 1;
  o->scale_min = 0.08;
  o->scale_max = 1.0;
  o->ratio_min = 3.0 / 4.0;
  o->ratio_max = 4.0 / 3.0;
  o->flip_p = 0.5;
  o->dct_scaling = 1;
  o->on_error = PL_IMAGE_ERROR_FAIL;
}

/* ---------------------------------------------------------------- crops */

typedef struct crop_box {
  double x0, y0, x1, y1; /* the box that becomes the output */
  uint32_t rx, ry, rw, rh; /* the region decoded */
  bool flip;
  int32_t param[4]; /* top, left, height, width (the crop field) */
} crop_box;

typedef struct plan_ctx {
  const images_impl *im;
  pl_rng rng;
  crop_box box;
} plan_ctx;

static void random_resized_crop(plan_ctx *c, uint32_t W, uint32_t H) {
  const pl_image_options *o = &c->im->opt;
  double area = (double)W * H;
  double lr0 = log(o->ratio_min), lr1 = log(o->ratio_max);
  int64_t w = W, h = H, top = 0, left = 0;
  int attempt;
  for (attempt = 0; attempt < 10; attempt++) {
    double target = area * pl_rng_uniform(&c->rng, o->scale_min, o->scale_max);
    double aspect = exp(pl_rng_uniform(&c->rng, lr0, lr1));
    w = (int64_t)rint(sqrt(target * aspect));
    h = (int64_t)rint(sqrt(target / aspect));
    if (w > 0 && w <= W && h > 0 && h <= H) {
      top = (int64_t)pl_rng_below(&c->rng, (uint64_t)(H - h + 1));
      left = (int64_t)pl_rng_below(&c->rng, (uint64_t)(W - w + 1));
      break;
    }
  }
  if (attempt == 10) { /* torchvision's fallback: a central crop */
    double in_ratio = (double)W / H;
    w = W, h = H;
    if (in_ratio < o->ratio_min)
      h = (int64_t)rint(W / o->ratio_min);
    else if (in_ratio > o->ratio_max)
      w = (int64_t)rint(H * o->ratio_max);
    h = PL_MAX(PL_MIN(h, (int64_t)H), 1);
    w = PL_MAX(PL_MIN(w, (int64_t)W), 1);
    top = (H - h) / 2;
    left = (W - w) / 2;
  }
  crop_box *b = &c->box;
  b->x0 = (double)left, b->y0 = (double)top;
  b->x1 = (double)(left + w), b->y1 = (double)(top + h);
  b->rx = (uint32_t)left, b->ry = (uint32_t)top;
  b->rw = (uint32_t)w, b->rh = (uint32_t)h;
  b->flip = pl_rng_unit(&c->rng) < o->flip_p;
  b->param[0] = (int32_t)top, b->param[1] = (int32_t)left;
  b->param[2] = (int32_t)h, b->param[3] = (int32_t)w;
}

static void resize_center_crop(plan_ctx *c, uint32_t W, uint32_t H) {
  const pl_image_options *o = &c->im->opt;
  double R = o->resize, S = o->size;
  uint64_t nw, nh;
  if (W <= H) {
    nw = o->resize;
    nh = (uint64_t)(R * H / W);
  } else {
    nh = o->resize;
    nw = (uint64_t)(R * W / H);
  }
  nw = PL_MAX(nw, 1), nh = PL_MAX(nh, 1);
  double top = rint(((double)nh - S) / 2.0), left = rint(((double)nw - S) / 2.0);
  double sx = (double)W / nw, sy = (double)H / nh;
  crop_box *b = &c->box;
  b->x0 = left * sx, b->x1 = (left + S) * sx;
  b->y0 = top * sy, b->y1 = (top + S) * sy;
  /* The filter reaches `support` (the scale) past the box on each side;
   * PIL resizes the whole image, so its window is the image. */
  double mx = PL_MAX(sx, 1.0) + 1, my = PL_MAX(sy, 1.0) + 1;
  double rx0 = PL_MAX(floor(b->x0 - mx), 0), ry0 = PL_MAX(floor(b->y0 - my), 0);
  double rx1 = PL_MIN(ceil(b->x1 + mx), W), ry1 = PL_MIN(ceil(b->y1 + my), H);
  b->rx = (uint32_t)rx0, b->ry = (uint32_t)ry0;
  b->rw = (uint32_t)PL_MAX(rx1 - rx0, 1), b->rh = (uint32_t)PL_MAX(ry1 - ry0, 1);
  b->flip = false;
  b->param[0] = (int32_t)rint(b->y0), b->param[1] = (int32_t)rint(b->x0);
  b->param[2] = (int32_t)rint(b->y1 - b->y0);
  b->param[3] = (int32_t)rint(b->x1 - b->x0);
}

/* The smallest JPEG DCT scale of 8/8, 4/8, 2/8 or 1/8 that keeps the box at
 * least `size` pixels across both ways, so the resize still only shrinks.
 * libjpeg-turbo also scales by other eighths, but their inverse DCTs (and
 * the 2x-sized ones it then runs on 4:2:0 chroma) are scalar C: measured
 * on the bench folder, allowing 5/8..7/8 cost more in the decoder than
 * the smaller resize saved. */
static uint32_t pick_eighths(const crop_box *b, uint32_t size,
                             uint32_t min_eighths) {
  double side = PL_MIN(b->x1 - b->x0, b->y1 - b->y0);
  uint32_t m = 8;
  while (m / 2 >= min_eighths && side * (m / 2) / 8 >= size)
    m /= 2;
  return m;
}

static void plan_decode(void *user, uint32_t W, uint32_t H,
                        uint32_t min_eighths, pl_decode_plan *p) {
  plan_ctx *c = user;
  if (c->im->opt.train)
    random_resized_crop(c, W, H);
  else
    resize_center_crop(c, W, H);
  const crop_box *b = &c->box;
  *p = (pl_decode_plan){b->rx, b->ry, b->rw, b->rh, 8};
  if (c->im->opt.dct_scaling)
    p->eighths = pick_eighths(b, c->im->opt.size, min_eighths);
}

/* ---------------------------------------------------------------- reads */

static const char *file_kind(mode_t m) {
  return S_ISFIFO(m)   ? "FIFO"
         : S_ISDIR(m)  ? "directory"
         : S_ISCHR(m)  ? "character device"
         : S_ISBLK(m)  ? "block device"
         : S_ISSOCK(m) ? "socket"
                       : "special file";
}

/* The file open for reading, checked, and its size. */
static pl_status open_image(const char *path, int *fd_out, size_t *size_out,
                            pl_error *err) {
  /* O_NONBLOCK: opening a FIFO (or a device) without it waits for a
   * writer, forever; the type is checked on the descriptor, after. It
   * changes nothing for the regular files read below. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    pl_errorf(err, PL_IO, "%s: cannot open: %s", path, strerror(e));
    pl_error_set_errno(err, e);
    pl_error_set_path(err, path);
    return PL_IO;
  }
  struct stat st;
  pl_status s = PL_OK;
  if (fstat(fd, &st) != 0)
    s = pl_errorf(err, PL_IO, "%s: cannot stat: %s", path, strerror(errno));
  else if (!S_ISREG(st.st_mode))
    s = pl_errorf(err, PL_IO, "%s: not a regular file (a %s)", path,
                  file_kind(st.st_mode));
  else if ((uint64_t)st.st_size > MAX_FILE_BYTES)
    s = pl_errorf(err, PL_IO, "%s: %llu bytes, over the %llu a file may have",
                  path, (unsigned long long)st.st_size,
                  (unsigned long long)MAX_FILE_BYTES);
  if (s != PL_OK) {
    pl_error_set_path(err, path);
    close(fd);
    return s;
  }
  *fd_out = fd;
  *size_out = (size_t)st.st_size;
  return PL_OK;
}

/* size bytes of fd into buf; closes fd. */
static pl_status read_all(int fd, const char *path, uint8_t *buf, size_t size,
                          pl_error *err) {
  size_t got = 0;
  while (got < size) {
    ssize_t r = read(fd, buf + got, size - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      int e = r < 0 ? errno : 0;
      close(fd);
      pl_errorf(err, PL_IO, "%s: read failed: %s", path,
                e ? strerror(e) : "the file shrank");
      pl_error_set_path(err, path);
      return PL_IO;
    }
    got += (size_t)r;
  }
  close(fd);
  return PL_OK;
}

/* The whole file into the scratch's file slot. */
static pl_status read_file(const char *path, pl_scratch *sc, uint8_t **out,
                           size_t *n, pl_error *err) {
  int fd;
  size_t size;
  PL_TRY(open_image(path, &fd, &size, err));
  uint8_t *buf = pl_scratch_get(sc, SLOT_FILE, size ? size : 1);
  if (!buf) {
    close(fd);
    return pl_errorf(err, PL_NO_MEMORY, "%s: out of memory", path);
  }
  PL_TRY(read_all(fd, path, buf, size, err));
  *out = buf;
  *n = size;
  return PL_OK;
}

/* The box in the decoded buffer's pixels, and the filter's window. */
static void resize_source(const pl_decoded *d, const crop_box *b,
                          pl_resize_src *s) {
  double sx = (double)d->sw / d->width, sy = (double)d->sh / d->height;
  const pl_decode_plan *p = &d->plan;
  s->rgbx = d->rgbx;
  s->w = d->bw, s->h = d->bh;
  s->box_x0 = b->x0 * sx - d->bx, s->box_x1 = b->x1 * sx - d->bx;
  s->box_y0 = b->y0 * sy - d->by, s->box_y1 = b->y1 * sy - d->by;
  double wx0 = floor(p->x * sx) - d->bx, wx1 = ceil((p->x + p->w) * sx) - d->bx;
  double wy0 = floor(p->y * sy) - d->by, wy1 = ceil((p->y + p->h) * sy) - d->by;
  s->x0 = (uint32_t)PL_MAX(wx0, 0), s->x1 = (uint32_t)PL_MIN(wx1, d->bw);
  s->y0 = (uint32_t)PL_MAX(wy0, 0), s->y1 = (uint32_t)PL_MIN(wy1, d->bh);
  s->x1 = PL_MAX(s->x1, s->x0 + 1), s->y1 = PL_MAX(s->y1, s->y0 + 1);
}

/* The label and crop fields of a sample whose image is written. */
static void put_extras(const images_impl *im, uint64_t index,
                       const crop_box *b, void *const *dst) {
  memcpy(dst[1], &im->label[index], sizeof(int64_t));
  if (im->opt.crop_field) {
    int32_t crop[5] = {b->param[0], b->param[1], b->param[2], b->param[3],
                       b->flip};
    memcpy(dst[2], crop, sizeof crop);
  }
}

/* Sample `index` from its file's bytes data[0..n). */
static pl_status decode_one(const images_impl *im, uint64_t index,
                            const pl_sample_ctx *ctx, pl_scratch *sc,
                            const uint8_t *data, size_t n, void *const *dst,
                            pl_error *err) {
  const char *path = im->names + im->offset[index];
  plan_ctx pc = {.im = im,
                 .rng = pl_rng_for(ctx->seed, ctx->epoch, index,
                                   RNG_STREAM_CROP)};
  pl_decoded d;
  pl_status s =
      pl_image_decode(data, n, path, plan_decode, &pc, sc, &d, err);
  if (s != PL_OK) {
    pl_error_set_path(err, path); /* the message names it */
    return s;
  }
  pl_resize_src src;
  resize_source(&d, &pc.box, &src);
  s = pl_resize_rgbx(&src, im->opt.size, im->opt.size, pc.box.flip, dst[0],
                     sc, SLOT_RESIZE, err);
  if (s != PL_OK) {
    pl_error_set_path(err, path);
    return pl_error_prefix(err, "%s", path);
  }
  put_extras(im, index, &pc.box, dst);
  return PL_OK;
}

static pl_status load_one(const images_impl *im, uint64_t index,
                          const pl_sample_ctx *ctx, pl_scratch *sc,
                          void *const *dst, pl_error *err) {
  const char *path = im->names + im->offset[index];
  uint8_t *data = NULL;
  size_t n = 0;
  PL_TRY(read_file(path, sc, &data, &n, err));
  return decode_one(im, index, ctx, sc, data, n, dst, err);
}

/* For sources whose images sit inside bigger files (data/image_sample.h):
 * the steps of load_one after the file is read. */
pl_status pl_image_sample_from_bytes(const pl_image_options *opt,
                                     const uint8_t *data, size_t n,
                                     const char *name,
                                     const pl_sample_ctx *ctx, uint64_t index,
                                     pl_scratch *sc, void *image,
                                     int32_t crop[5], pl_error *err) {
  _Static_assert(PL_IMAGE_SAMPLE_FREE_SLOT == SLOT_FILE, "free slot");
  images_impl im = {.opt = *opt};
  plan_ctx pc = {.im = &im,
                 .rng = pl_rng_for(ctx->seed, ctx->epoch, index,
                                   RNG_STREAM_CROP)};
  pl_decoded d;
  PL_TRY(pl_image_decode(data, n, name, plan_decode, &pc, sc, &d, err));
  pl_resize_src src;
  resize_source(&d, &pc.box, &src);
  pl_status s = pl_resize_rgbx(&src, opt->size, opt->size, pc.box.flip,
                               image, sc, SLOT_RESIZE, err);
  if (s != PL_OK)
    return pl_error_prefix(err, "%s", name);
  if (crop) {
    int32_t c[5] = {pc.box.param[0], pc.box.param[1], pc.box.param[2],
                    pc.box.param[3], pc.box.flip};
    memcpy(crop, c, sizeof c);
  }
  return PL_OK;
}

static void log_replacement(const pl_sample_ctx *ctx, uint64_t index,
                            uint64_t with, const pl_error *why) {
  if (ctx->log)
    pl_log(ctx->log, PL_LOG_WARN,
           "images: sample %llu replaced by sample %llu: %s",
           (unsigned long long)index, (unsigned long long)with, why->message);
}

static pl_status read_or_replace(images_impl *im, uint64_t index,
                                 const pl_sample_ctx *ctx, pl_scratch *sc,
                                 void *const *dst, pl_error *err) {
  pl_error own; /* err may be NULL (pl_dataset_read): the skip needs one */
  pl_error *e = err ? err : &own;
  pl_status s = load_one(im, index, ctx, sc, dst, e);
  if (s == PL_OK || im->opt.on_error != PL_IMAGE_ERROR_SKIP ||
      s == PL_NO_MEMORY)
    return s;
  /* The replacement depends on the index alone (not the epoch or the
   * worker), so a bad file is always replaced by the same good one. */
  pl_rng r = pl_rng_for(0, 0, index, RNG_STREAM_SKIP);
  /* The sample's own error, before a failed replacement overwrites it. */
  pl_error why = *e;
  int tries = im->n > 1 ? SKIP_ATTEMPTS : 0;
  for (int attempt = 0; attempt < tries; attempt++) {
    uint64_t other = pl_rng_below(&r, im->n - 1);
    other += other >= index;
    if (load_one(im, other, ctx, sc, dst, e) == PL_OK) {
      atomic_fetch_add_explicit(&im->replaced, 1, memory_order_relaxed);
      log_replacement(ctx, index, other, &why);
      /* The loader fails a batch whose error has a status set, whatever
       * the read returned: the failure that was replaced is cleared. */
      pl_error_clear(e);
      return PL_OK;
    }
  }
  /* None read: the error is the sample's own (its file, its path), not
   * that of the last replacement tried. */
  *e = why;
  return pl_error_prefix(e, "no readable replacement after %d tries", tries);
}

static pl_status images_read(const pl_dataset *ds, uint64_t index,
                             const pl_sample_ctx *ctx, void *const *dst,
                             pl_error *err) {
  images_impl *im = ds->impl;
  pl_scratch *sc = pl_scratch_take(&im->scratch);
  if (!sc)
    return pl_errorf(err, PL_NO_MEMORY, "images: out of memory");
  pl_status s = read_or_replace(im, index, ctx, sc, dst, err);
  pl_scratch_give(&im->scratch, sc);
  return s;
}

/* ---------------------------------------------------------------- GPU */

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
  PL_TRY(open_image(path, &fd, &size, err));
  if (gb->used + size > gb->cap) {
    size_t cap = PL_MAX(gb->cap * 2, gb->used + size + (1u << 20));
    uint8_t *f = realloc(gb->files, cap);
    if (!f) {
      close(fd);
      return pl_errorf(err, PL_NO_MEMORY, "%s: out of memory", path);
    }
    gb->files = f, gb->cap = cap;
  }
  PL_TRY(read_all(fd, path, gb->files + gb->used, size, err));
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
      decode_one(im, index, ctx, sc, gb->files + gb->off[i], gb->len[i],
                 dstv, err) == PL_OK)
    return PL_OK;
  pl_error_clear(err);
  return read_or_replace(im, index, ctx, sc, dstv, err);
}

/* Job j for sample i: the same draws as the CPU path's (plan_decode). */
static void plan_job(const images_impl *im, uint64_t index,
                     const pl_sample_ctx *ctx, const pl_jpeg_info *info,
                     const gpu_batch *gb, uint32_t i, void *const *dstv,
                     pl_gpu_job *j) {
  plan_ctx pc = {.im = im,
                 .rng = pl_rng_for(ctx->seed, ctx->epoch, index,
                                   RNG_STREAM_CROP)};
  if (im->opt.train)
    random_resized_crop(&pc, info->width, info->height);
  else
    resize_center_crop(&pc, info->width, info->height);
  const crop_box *b = &pc.box;
  *j = (pl_gpu_job){gb->files + gb->off[i], gb->len[i], info->width,
                    info->height, b->rx, b->ry, b->rw, b->rh, b->x0, b->y0,
                    b->x1, b->y1, b->flip, dstv[0], 0};
  put_extras(im, index, b, dstv);
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
                          gpu_batch *gb) {
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
    plan_job(im, idx[i], ctx, &info, gb, i, dstv, &gb->jobs[nj++]);
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

static pl_status batch_run(gpu_view *v, const pl_dataset *ds,
                           const uint64_t *idx, uint32_t n,
                           const pl_sample_ctx *ctx, const pl_batch_dst *dst,
                           gpu_batch *gb, pl_scratch *sc, pl_error *err) {
  images_impl *im = v->inner->impl;
  uint32_t cand = read_all_files(im, v, idx, n, dst, gb);
  uint32_t k = pl_split_gpu_count(&v->split, cand);
  uint32_t nj = plan_jobs(im, ds, idx, n, k, ctx, dst, gb), ncpu = 0;
  void *ticket = NULL;
  pl_error ge;
  double t0 = pl_now();
  if (nj && v->gpu->begin(v->gpu, gb->jobs, nj, im->opt.size, &ticket,
                          &ge) != PL_OK) {
    gpu_off(v, &ge);
    for (uint32_t j = 0; j < nj; j++)
      gb->jobs[j].failed = 1;
  }
  double t1 = pl_now();
  pl_status s = cpu_share(im, ds, idx, n, ctx, dst, gb, sc, &ncpu, err);
  uint64_t cpu_ns = (uint64_t)((pl_now() - t1) * 1e9);
  if (ticket && v->gpu->finish(v->gpu, ticket, &ge) != PL_OK)
    gpu_off(v, &ge); /* its jobs are marked failed */
  uint64_t gpu_ns = (uint64_t)((pl_now() - t0) * 1e9);
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
  pl_split_observe(&v->split, ncpu, cpu_ns, nj - nfail, gpu_ns);
  return s;
}

static pl_status images_read_batch(const pl_dataset *ds, const uint64_t *idx,
                                   uint32_t n, const pl_batch_info *info,
                                   const pl_batch_dst *dst, pl_error *err) {
  gpu_view *v = ds->impl;
  images_impl *im = v->inner->impl;
  /* No log hook here: read_batch has none (replacements are counted). */
  const pl_sample_ctx ctx = {info->seed, info->epoch, NULL};
  gpu_batch *gb = gb_take(v);
  pl_scratch *sc = pl_scratch_take(&im->scratch);
  pl_status s = gb && sc && gb_reserve(gb, n)
                    ? batch_run(v, ds, idx, n, &ctx, dst, gb, sc, err)
                    : pl_errorf(err, PL_NO_MEMORY, "images: out of memory");
  pl_scratch_give(&im->scratch, sc);
  gb_give(v, gb);
  return s;
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

static uint64_t images_replaced(const pl_dataset *ds) {
  images_impl *im = ds->impl;
  return atomic_load_explicit(&im->replaced, memory_order_relaxed);
}

static void images_destroy(void *p) {
  images_impl *im = p;
  if (!im)
    return;
  free(im->names);
  free(im->offset);
  free(im->label);
  pl_scratch_pool_destroy(&im->scratch);
  free(im);
}

static const char *images_sample_path(const pl_dataset *ds, uint64_t index,
                                      int64_t *label) {
  const images_impl *im = ds->impl;
  if (label)
    *label = im->label[index];
  return im->names + im->offset[index];
}

static const pl_dataset_vt images_vt = {
    .kind = "images",
    .read = images_read,
    .replaced = images_replaced,
    .sample_path = images_sample_path,
    .destroy_impl = images_destroy,
};

/* The GPU view (gpu_view): batches are read whole. */
static const pl_dataset_vt images_gpu_vt = {
    .kind = "images",
    .read = view_read,
    .read_batch = images_read_batch,
    .replaced = view_replaced,
    .sample_path = view_sample_path,
    .destroy_impl = view_destroy,
};

int pl_images_is(const pl_dataset *ds) {
  return ds && ds->vt == &images_vt;
}

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

/* ---------------------------------------------------------------- listing */

typedef struct listing {
  char *names;
  size_t used, cap;
  uint64_t *offset;
  int64_t *label;
  uint64_t n, ncap;
} listing;

static pl_status list_add(listing *l, const char *path, int64_t label,
                          pl_error *err) {
  size_t len = strlen(path) + 1;
  if (l->used + len > l->cap) {
    size_t cap = PL_MAX(l->cap * 2, l->used + len + 4096);
    char *p = realloc(l->names, cap);
    if (!p)
      return pl_errorf(err, PL_NO_MEMORY, "out of memory listing images");
    l->names = p, l->cap = cap;
  }
  if (l->n == l->ncap) {
    uint64_t cap = PL_MAX(l->ncap * 2, 1024);
    uint64_t *o = realloc(l->offset, cap * sizeof *o);
    if (o)
      l->offset = o;
    int64_t *b = o ? realloc(l->label, cap * sizeof *b) : NULL;
    if (!b)
      return pl_errorf(err, PL_NO_MEMORY, "out of memory listing images");
    l->label = b, l->ncap = cap;
  }
  memcpy(l->names + l->used, path, len);
  l->offset[l->n] = l->used;
  l->label[l->n++] = label;
  l->used += len;
  return PL_OK;
}

static bool has_image_extension(const char *name) {
  const char *dot = strrchr(name, '.');
  return dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") ||
                 !strcasecmp(dot, ".png"));
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct names {
  char **v;
  size_t n, cap;
} names;

static void names_sort(names *s) {
  if (s->n > 1) /* qsort's base may not be NULL, even for 0 items */
    qsort(s->v, s->n, sizeof *s->v, cmp_str);
}

static void names_free(names *s) {
  for (size_t i = 0; i < s->n; i++)
    free(s->v[i]);
  free(s->v);
  memset(s, 0, sizeof *s);
}

static bool names_add(names *s, const char *a, const char *b) {
  if (s->n == s->cap) {
    size_t cap = PL_MAX(s->cap * 2, 64);
    char **v = realloc(s->v, cap * sizeof *v);
    if (!v)
      return false;
    s->v = v, s->cap = cap;
  }
  size_t la = strlen(a), lb = b ? strlen(b) : 0;
  char *p = malloc(la + lb + 2);
  if (!p)
    return false;
  memcpy(p, a, la);
  if (b) {
    p[la] = '/';
    memcpy(p + la + 1, b, lb + 1);
  } else {
    p[la] = '\0';
  }
  s->v[s->n++] = p;
  return true;
}

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode); /* follows links */
}

/* is_dir() of entry e of a listing, at `path`: from the entry's own type
 * where the file system gives one, as os.scandir does (a stat per file
 * made an ImageNet-sized folder's listing twice as slow as torchvision's);
 * a link or an unknown type is stat()ed, so links to folders are followed. */
static bool entry_is_dir(const struct dirent *e, const char *path) {
  if (e->d_type == DT_DIR)
    return true;
  if (e->d_type != DT_UNKNOWN && e->d_type != DT_LNK)
    return false;
  return is_dir(path);
}

/* Every folder under dir (dir included), as os.walk(followlinks=True). */
static pl_status walk_dirs(const char *dir, int depth, names *dirs,
                           pl_error *err) {
  if (!names_add(dirs, dir, NULL))
    return pl_errorf(err, PL_NO_MEMORY, "out of memory listing images");
  if (depth == MAX_DEPTH)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "%s: folders nest more than %d deep (a link loop?)",
                     dir, MAX_DEPTH);
  DIR *d = opendir(dir);
  if (!d)
    return pl_errorf(err, PL_IO, "%s: cannot list: %s", dir,
                     strerror(errno));
  names subs = {0};
  pl_status s = PL_OK;
  struct dirent *e;
  while (s == PL_OK && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    if (!names_add(&subs, dir, e->d_name))
      s = pl_errorf(err, PL_NO_MEMORY, "out of memory listing images");
    else if (!entry_is_dir(e, subs.v[subs.n - 1]))
      free(subs.v[--subs.n]);
  }
  closedir(d);
  for (size_t i = 0; s == PL_OK && i < subs.n; i++)
    s = walk_dirs(subs.v[i], depth + 1, dirs, err);
  names_free(&subs);
  return s;
}

/* The image files directly in dir, sorted. */
static pl_status dir_files(const char *dir, names *files, pl_error *err) {
  DIR *d = opendir(dir);
  if (!d)
    return pl_errorf(err, PL_IO, "%s: cannot list: %s", dir,
                     strerror(errno));
  struct dirent *e;
  pl_status s = PL_OK;
  while (s == PL_OK && (e = readdir(d))) {
    if (!has_image_extension(e->d_name))
      continue;
    if (!names_add(files, dir, e->d_name))
      s = pl_errorf(err, PL_NO_MEMORY, "out of memory listing images");
    else if (entry_is_dir(e, files->v[files->n - 1]))
      free(files->v[--files->n]);
  }
  closedir(d);
  names_sort(files);
  return s;
}

/* One class: files of every folder under it, folders in sorted order (as
 * sorted(os.walk(...)) visits them), files sorted within each. */
static pl_status list_class(listing *l, const char *dir, int64_t label,
                            pl_error *err) {
  names dirs = {0};
  pl_status s = walk_dirs(dir, 0, &dirs, err);
  if (s == PL_OK)
    names_sort(&dirs);
  uint64_t before = l->n;
  for (size_t i = 0; s == PL_OK && i < dirs.n; i++) {
    names files = {0};
    s = dir_files(dirs.v[i], &files, err);
    for (size_t k = 0; s == PL_OK && k < files.n; k++)
      s = list_add(l, files.v[k], label, err);
    names_free(&files);
  }
  names_free(&dirs);
  if (s == PL_OK && l->n == before)
    return pl_errorf(err, PL_FORMAT,
                     "%s: no .jpg, .jpeg or .png files in class folder",
                     dir);
  return s;
}

static pl_status list_folder(listing *l, const char *root, pl_error *err) {
  names classes = {0};
  DIR *d = opendir(root);
  if (!d)
    return pl_errorf(err, PL_IO, "%s: cannot list: %s", root,
                     strerror(errno));
  struct dirent *e;
  pl_status s = PL_OK;
  while (s == PL_OK && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    if (!names_add(&classes, root, e->d_name))
      s = pl_errorf(err, PL_NO_MEMORY, "out of memory listing images");
    else if (!entry_is_dir(e, classes.v[classes.n - 1]))
      free(classes.v[--classes.n]);
  }
  closedir(d);
  names_sort(&classes);
  if (s == PL_OK && classes.n == 0)
    s = pl_errorf(err, PL_FORMAT,
                  "%s: no class folders (want ROOT/CLASS/IMAGE.jpg)", root);
  for (size_t i = 0; s == PL_OK && i < classes.n; i++)
    s = list_class(l, classes.v[i], (int64_t)i, err);
  names_free(&classes);
  return s;
}

/* "LIST:LINE: why", with the list file as the error's path. */
static pl_status list_error(pl_error *err, const char *list, uint64_t lineno,
                            const char *fmt, ...) PL_PRINTF(4, 5);
static pl_status list_error(pl_error *err, const char *list, uint64_t lineno,
                            const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pl_errorf(err, PL_FORMAT, "%s:%llu: %s", list, (unsigned long long)lineno,
            msg);
  pl_error_set_path(err, list);
  return PL_FORMAT;
}

/* "PATH LABEL" lines; blank lines and '#' comments skipped. */
static pl_status list_line(listing *l, const char *list, const char *dir,
                           char *line, uint64_t lineno, pl_error *err) {
  size_t len = strlen(line);
  while (len && (line[len - 1] == '\r' || line[len - 1] == ' '))
    line[--len] = '\0';
  if (!len || line[0] == '#')
    return PL_OK;
  char *sp = strrchr(line, ' ');
  char *tab = strrchr(line, '\t');
  sp = (!sp || (tab && tab > sp)) ? tab : sp;
  char *end = NULL;
  errno = 0;
  long long label = sp ? strtoll(sp + 1, &end, 10) : 0;
  if (sp && errno == ERANGE) /* strtoll saturates: refuse, do not clamp */
    return list_error(err, list, lineno,
                      "label '%s' does not fit in int64 (at most "
                      "9223372036854775807)",
                      sp + 1);
  if (!sp || sp == line || !end || *end || end == sp + 1 || label < 0)
    return list_error(err, list, lineno,
                      "want 'PATH LABEL' with a label >= 0");
  *sp = '\0';
  if (line[0] == '/')
    return list_add(l, line, label, err);
  char *full = malloc(strlen(dir) + strlen(line) + 2);
  if (!full)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory listing images");
  sprintf(full, "%s/%s", dir, line);
  pl_status s = list_add(l, full, label, err);
  free(full);
  return s;
}

/* The list file for reading, into *out. O_NONBLOCK: a FIFO's open (a
 * root that is not a folder is taken as a list) waits for a writer
 * forever; the type is checked on the descriptor, as read_file does for
 * images. */
static pl_status open_list(const char *list, FILE **out, pl_error *err) {
  int fd = open(list, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  int e = fd < 0 ? errno : fstat(fd, &st) != 0 ? errno : 0;
  pl_status s = PL_OK;
  if (e)
    s = pl_errorf(err, PL_IO, "%s: cannot %s: %s", list,
                  fd < 0 ? "open" : "stat", strerror(e));
  else if (!S_ISREG(st.st_mode))
    s = pl_errorf(err, PL_IO, "%s: not a folder or a list file (a %s)",
                  list, file_kind(st.st_mode));
  else if (!(*out = fdopen(fd, "r")))
    s = pl_errorf(err, PL_NO_MEMORY, "%s: cannot open: %s", list,
                  strerror(errno));
  if (s != PL_OK) {
    pl_error_set_path(err, list);
    if (e)
      pl_error_set_errno(err, e);
    if (fd >= 0)
      close(fd);
  }
  return s;
}

static pl_status list_file(listing *l, const char *list, pl_error *err) {
  FILE *f = NULL;
  PL_TRY(open_list(list, &f, err));
  char *dir = strdup(list); /* the list's folder: paths are relative to it */
  char *slash = dir ? strrchr(dir, '/') : NULL;
  if (dir && !slash)
    strcpy(dir, ".");
  else if (slash)
    slash[slash == dir] = '\0';
  char *line = NULL;
  size_t cap = 0;
  uint64_t no = 0;
  pl_status s = dir ? PL_OK : pl_errorf(err, PL_NO_MEMORY, "out of memory");
  while (s == PL_OK && getline(&line, &cap, f) >= 0) {
    no++;
    line[strcspn(line, "\n")] = '\0';
    s = list_line(l, list, dir, line, no, err);
  }
  free(line);
  free(dir);
  fclose(f);
  if (s == PL_OK && l->n == 0)
    s = pl_errorf(err, PL_FORMAT, "%s: the list names no images", list);
  return s;
}

static pl_status check_options(const pl_image_options *o, pl_error *err) {
  if (o->struct_size != sizeof *o)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "images: options not initialised with "
                     "pl_image_options_init");
  if (o->size == 0 || o->size > 8192)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "images: size %u (want 1 to 8192)", o->size);
  if (!(o->scale_min > 0 && o->scale_min <= o->scale_max && o->scale_max <= 1))
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "images: scale %g:%g (want 0 < min <= max <= 1)",
                     o->scale_min, o->scale_max);
  if (!(o->ratio_min > 0 && o->ratio_min <= o->ratio_max &&
        isfinite(o->ratio_max)))
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "images: ratio %g:%g (want 0 < min <= max)",
                     o->ratio_min, o->ratio_max);
  if (!(o->flip_p >= 0 && o->flip_p <= 1))
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "images: flip probability %g (want 0 to 1)", o->flip_p);
  if (!o->train && o->resize && o->resize < o->size)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "images: resize %u is smaller than size %u", o->resize,
                     o->size);
  if (!pl_image_have_jpeg() || !pl_image_have_png())
    return pl_errorf(err, PL_UNSUPPORTED,
                     "images: this build lacks %s (install libjpeg62-turbo-dev "
                     "and libpng-dev, then rebuild)",
                     !pl_image_have_jpeg() ? "libjpeg-turbo" : "libpng");
  return PL_OK;
}

pl_status pl_dataset_open_images(const char *root_or_list,
                                 const pl_image_options *opt,
                                 pl_dataset **out, pl_error *err) {
  if (!out)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!root_or_list || !root_or_list[0] || !opt)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "images: a folder or list file and options are "
                     "required");
  PL_TRY(check_options(opt, err));
  struct stat st;
  if (stat(root_or_list, &st) != 0) {
    int e = errno;
    pl_errorf(err, PL_IO, "%s: %s", root_or_list, strerror(e));
    pl_error_set_errno(err, e);
    pl_error_set_path(err, root_or_list);
    return PL_IO;
  }
  listing l = {0};
  pl_status s = S_ISDIR(st.st_mode) ? list_folder(&l, root_or_list, err)
                                    : list_file(&l, root_or_list, err);
  images_impl *im = s == PL_OK ? calloc(1, sizeof *im) : NULL;
  if (s == PL_OK && !im)
    s = pl_errorf(err, PL_NO_MEMORY, "out of memory");
  if (s != PL_OK) {
    free(l.names), free(l.offset), free(l.label);
    return s;
  }
  im->opt = *opt;
  if (!im->opt.resize)
    im->opt.resize = (uint32_t)(opt->size / 0.875);
  im->n = l.n, im->names = l.names, im->offset = l.offset, im->label = l.label;
  atomic_init(&im->replaced, 0);
  pl_scratch_pool_init(&im->scratch);
  pl_field fields[3] = {
      {.name = "image", .dtype = PL_UINT8, .ndim = 3,
       .shape = {3, opt->size, opt->size}},
      {.name = "label", .dtype = PL_INT64, .ndim = 0},
      {.name = "crop", .dtype = PL_INT32, .ndim = 1, .shape = {5}},
  };
  s = pl_dataset_new(&images_vt, im, im->n, fields, opt->crop_field ? 3 : 2,
                     out, err);
  if (s != PL_OK)
    images_destroy(im);
  return s;
}
