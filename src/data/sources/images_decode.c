/* Crop planning, decode and resize of one image's bytes
 * (images_internal.h); the image source's and the tar shards' samples
 * (data/image_sample.h) both come from pl_images_decode.
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
#include "data/sources/images_internal.h"
#include "core/rng.h"
#include "data/image_resize.h"
#include "data/image_sample.h"

#include <math.h>
#include <string.h>

#define RNG_STREAM_CROP 0x63726f70ull /* "crop" */

typedef struct plan_ctx {
  const pl_image_options *opt;
  pl_rng rng;
  crop_box box;
} plan_ctx;

static void random_resized_crop(plan_ctx *c, uint32_t W, uint32_t H) {
  const pl_image_options *o = c->opt;
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
  const pl_image_options *o = c->opt;
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
  if (c->opt->train)
    random_resized_crop(c, W, H);
  else
    resize_center_crop(c, W, H);
  const crop_box *b = &c->box;
  *p = (pl_decode_plan){b->rx, b->ry, b->rw, b->rh, 8};
  if (c->opt->dct_scaling)
    p->eighths = pick_eighths(b, c->opt->size, min_eighths);
}

void pl_images_crop(const pl_image_options *opt, const pl_sample_ctx *ctx,
                    uint64_t index, uint32_t W, uint32_t H, crop_box *box) {
  plan_ctx pc = {.opt = opt,
                 .rng = pl_rng_for(ctx->seed, ctx->epoch, index,
                                   RNG_STREAM_CROP)};
  if (opt->train)
    random_resized_crop(&pc, W, H);
  else
    resize_center_crop(&pc, W, H);
  *box = pc.box;
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

pl_status pl_images_decode(const pl_image_options *opt, const uint8_t *data,
                           size_t n, const char *name,
                           const pl_sample_ctx *ctx, uint64_t index,
                           pl_scratch *sc, void *image, crop_box *box,
                           pl_error *err) {
  plan_ctx pc = {.opt = opt,
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
  *box = pc.box;
  return PL_OK;
}

/* For sources whose images sit inside bigger files (data/image_sample.h):
 * the image source's steps after its file is read. */
pl_status pl_image_sample_from_bytes(const pl_image_options *opt,
                                     const uint8_t *data, size_t n,
                                     const char *name,
                                     const pl_sample_ctx *ctx, uint64_t index,
                                     pl_scratch *sc, void *image,
                                     int32_t crop[5], pl_error *err) {
  _Static_assert(PL_IMAGE_SAMPLE_FREE_SLOT == SLOT_FILE, "free slot");
  /* Set by pl_images_decode when it succeeds; zeroed for the compilers
   * that cannot see that at -O3 (gcc 13: -Wmaybe-uninitialized). */
  crop_box b = {0};
  PL_TRY(pl_images_decode(opt, data, n, name, ctx, index, sc, image, &b,
                          err));
  if (crop) {
    int32_t c[5] = {b.param[0], b.param[1], b.param[2], b.param[3], b.flip};
    memcpy(crop, c, sizeof c);
  }
  return PL_OK;
}
