/* JPEG and PNG region decoding (see image_decode.h). */
#include "data/image_decode.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PL_HAVE_JPEG
#include <jerror.h>
#include <jpeglib.h>
#endif
#ifdef PL_HAVE_PNG
#include <png.h>
#endif

#if defined(PL_HAVE_JPEG) || defined(PL_HAVE_PNG)
/* The codecs' archives are linked with their one reference to glibc's
 * stderr renamed to this (CMakeLists.txt, setup.py): a hidden pointer, so
 * the archives link into a shared object. Only their default printers use
 * it, and pinloader replaces those; it is set anyway, before main. */
extern FILE *pl_codec_stderr;
__attribute__((visibility("hidden"))) FILE *pl_codec_stderr;
__attribute__((constructor)) static void set_codec_stderr(void) {
  pl_codec_stderr = stderr;
}
#endif

bool pl_image_have_jpeg(void) {
#ifdef PL_HAVE_JPEG
  return true;
#else
  return false;
#endif
}

bool pl_image_have_png(void) {
#ifdef PL_HAVE_PNG
  return true;
#else
  return false;
#endif
}

/* Asks the plan and checks it against the image. */
static pl_status make_plan(const char *path, uint32_t w, uint32_t h,
                           uint32_t min_eighths, pl_plan_fn plan, void *user,
                           pl_decode_plan *p, pl_error *err) {
  if (w == 0 || h == 0 || (uint64_t)w * h > PL_IMAGE_MAX_PIXELS)
    return pl_errorf(err, PL_FORMAT,
                     "%s: the image is %ux%u pixels (from 1 to %llu "
                     "pixels are accepted)",
                     path, w, h, (unsigned long long)PL_IMAGE_MAX_PIXELS);
  memset(p, 0, sizeof *p);
  plan(user, w, h, min_eighths, p);
  p->eighths = PL_MAX(PL_MIN(p->eighths, 8), min_eighths);
  if (p->w == 0 || p->h == 0 || p->x >= w || p->y >= h || p->w > w - p->x ||
      p->h > h - p->y)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "%s: decode region %ux%u+%u+%u outside the %ux%u "
                     "image", path, p->w, p->h, p->x, p->y, w, h);
  return PL_OK;
}

static uint32_t ceil_div_u64(uint64_t a, uint64_t b) {
  return (uint32_t)((a + b - 1) / b);
}

/* The plan's region in the scaled image: [x0, x1) x [y0, y1). */
static void scaled_region(const pl_decoded *d, uint32_t *x0, uint32_t *x1,
                          uint32_t *y0, uint32_t *y1) {
  const pl_decode_plan *p = &d->plan;
  *x0 = (uint32_t)((uint64_t)p->x * d->sw / d->width);
  *y0 = (uint32_t)((uint64_t)p->y * d->sh / d->height);
  *x1 = ceil_div_u64((uint64_t)(p->x + p->w) * d->sw, d->width);
  *y1 = ceil_div_u64((uint64_t)(p->y + p->h) * d->sh, d->height);
  *x1 = PL_MAX(PL_MIN(*x1, d->sw), *x0 + 1);
  *y1 = PL_MAX(PL_MIN(*y1, d->sh), *y0 + 1);
}

/* ---------------------------------------------------------------- JPEG */
#ifdef PL_HAVE_JPEG

typedef struct jpeg_fail {
  struct jpeg_error_mgr pub;
  jmp_buf jump;
  char msg[JMSG_LENGTH_MAX];
  bool oom; /* libjpeg ran out of memory: not the file's fault */
} jpeg_fail;

static void jpeg_on_error(j_common_ptr c) {
  jpeg_fail *f = (jpeg_fail *)c->err;
  f->oom = c->err->msg_code == JERR_OUT_OF_MEMORY;
  (*c->err->format_message)(c, f->msg);
  longjmp(f->jump, 1);
}

/* Warnings are corrupt-data notes libjpeg recovers from; a premature end of
 * the file is an error (the rest of the image would be gray). */
static void jpeg_on_message(j_common_ptr c, int level) {
  if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF)
    jpeg_on_error(c);
}

/* PIL's CMYK -> RGB (Convert.c cmyk2rgb), after undoing Adobe's inversion. */
static uint8_t cmyk_channel(int v, int k) {
  int nk = 255 - k, t = v * nk + 128;
  int x = nk - (((t >> 8) + t) >> 8);
  return (uint8_t)(x < 0 ? 0 : x > 255 ? 255 : x);
}

/* In place: CMYK and RGBX pixels are both 4 bytes. */
static void cmyk_row_to_rgbx(uint8_t *px, uint32_t n, bool inverted) {
  for (uint32_t i = 0; i < n; i++, px += 4) {
    int c = px[0], m = px[1], y = px[2], k = px[3];
    if (inverted)
      c = 255 - c, m = 255 - m, y = 255 - y, k = 255 - k;
    px[0] = cmyk_channel(c, k);
    px[1] = cmyk_channel(m, k);
    px[2] = cmyk_channel(y, k);
  }
}

typedef struct jpeg_job {
  struct jpeg_decompress_struct ci;
  jpeg_fail fail;
  pl_scratch *scratch;
} jpeg_job;

static void jpeg_rows(jpeg_job *j, pl_decoded *d, uint32_t rows) {
  bool cmyk = j->ci.out_color_space == JCS_CMYK;
  for (uint32_t r = 0; r < rows; r++) {
    JSAMPROW row = d->rgbx + (size_t)r * d->bw * 4;
    if (jpeg_read_scanlines(&j->ci, &row, 1) != 1)
      ERREXIT(&j->ci, JERR_INPUT_EMPTY);
    if (cmyk)
      cmyk_row_to_rgbx(row, d->bw, j->ci.saw_Adobe_marker);
  }
}

/* Everything between setjmp and the end, where libjpeg may longjmp out. */
static void jpeg_run(jpeg_job *j, const uint8_t *data, size_t n,
                     const char *path, pl_plan_fn plan, void *user,
                     pl_decoded *d, pl_status *st, pl_error *err) {
  jpeg_mem_src(&j->ci, data, (unsigned long)n);
  jpeg_read_header(&j->ci, TRUE);
  d->width = j->ci.image_width;
  d->height = j->ci.image_height;
  if ((*st = make_plan(path, d->width, d->height, 1, plan, user, &d->plan,
                       err)) != PL_OK)
    return;
  j->ci.scale_num = d->plan.eighths;
  j->ci.scale_denom = 8;
  bool cmyk = j->ci.jpeg_color_space == JCS_CMYK ||
              j->ci.jpeg_color_space == JCS_YCCK;
  j->ci.out_color_space = cmyk ? JCS_CMYK : JCS_EXT_RGBX;
  jpeg_start_decompress(&j->ci);
  d->sw = j->ci.output_width;
  d->sh = j->ci.output_height;
  uint32_t x0, x1, y0, y1;
  scaled_region(d, &x0, &x1, &y0, &y1);
  JDIMENSION xoff = x0, cw = x1 - x0;
  if (cw < d->sw)
    jpeg_crop_scanline(&j->ci, &xoff, &cw);
  d->bx = xoff;
  d->by = y0;
  d->bw = cw;
  d->bh = y1 - y0;
  d->rgbx = pl_scratch_get(j->scratch, PL_DECODE_SLOT_PIXELS,
                           (size_t)d->bw * d->bh * 4);
  if (!d->rgbx) {
    *st = pl_errorf(err, PL_NO_MEMORY, "%s: out of memory decoding", path);
    return;
  }
  if (y0 > 0 && jpeg_skip_scanlines(&j->ci, y0) != y0)
    ERREXIT(&j->ci, JERR_INPUT_EMPTY);
  jpeg_rows(j, d, d->bh);
  *st = PL_OK;
}

static pl_status decode_jpeg(const uint8_t *data, size_t n, const char *path,
                             pl_plan_fn plan, void *user, pl_scratch *sc,
                             pl_decoded *d, pl_error *err) {
  jpeg_job *j = pl_scratch_get(sc, PL_DECODE_SLOT_JOB, sizeof *j);
  if (!j)
    return pl_errorf(err, PL_NO_MEMORY, "%s: out of memory decoding", path);
  memset(j, 0, sizeof *j);
  j->scratch = sc;
  pl_status st = PL_FORMAT;
  j->ci.err = jpeg_std_error(&j->fail.pub);
  j->fail.pub.error_exit = jpeg_on_error;
  j->fail.pub.emit_message = jpeg_on_message;
  jpeg_create_decompress(&j->ci);
  if (setjmp(j->fail.jump) == 0)
    jpeg_run(j, data, n, path, plan, user, d, &st, err);
  else
    st = pl_errorf(err, j->fail.oom ? PL_NO_MEMORY : PL_FORMAT,
                   "%s: JPEG: %s", path, j->fail.msg);
  jpeg_destroy_decompress(&j->ci); /* also after a partial decode */
  return st;
}
#endif /* PL_HAVE_JPEG */

/* ---------------------------------------------------------------- PNG */
#ifdef PL_HAVE_PNG

typedef struct png_job {
  const uint8_t *data;
  size_t n, pos;
  char msg[200];
  pl_scratch *scratch;
  uint8_t *row;
  bool oom; /* the longjmp was for our allocation, not the file */
} png_job;

static void png_on_error(png_structp p, png_const_charp msg) {
  png_job *j = png_get_error_ptr(p);
  snprintf(j->msg, sizeof j->msg, "%s", msg);
  png_longjmp(p, 1);
}

static void png_on_warning(png_structp p, png_const_charp msg) {
  (void)p;
  (void)msg; /* recoverable (an unknown chunk, a bad ancillary CRC) */
}

static void png_read_mem(png_structp p, png_bytep out, png_size_t len) {
  png_job *j = png_get_io_ptr(p);
  if (len > j->n - j->pos)
    png_error(p, "the file is truncated");
  memcpy(out, j->data + j->pos, len);
  j->pos += len;
}

/* Every PNG to 8-bit RGBX: an alpha channel stays as the 4th byte, which
 * the resize ignores (PIL's convert("RGB") drops alpha, uncomposited);
 * images without one get a filler byte. */
static void png_set_rgbx8(png_structp p, png_infop info) {
  png_set_expand(p); /* palette -> RGB, gray < 8 bits -> 8, tRNS -> alpha */
  png_set_strip_16(p);
  png_set_gray_to_rgb(p);
  png_set_filler(p, 0xFF, PNG_FILLER_AFTER); /* only where no alpha */
}

/* Rows [y, y + h) of the region, columns [x, x + w): progressively read
 * images are decoded whole (every pass touches every row), others row by
 * row, stopping after the region's last row. */
static void png_rows(png_structp p, png_infop info, png_job *j,
                     pl_decoded *d) {
  const pl_decode_plan *pl = &d->plan;
  size_t stride = (size_t)d->width * 4;
  int passes = png_set_interlace_handling(p);
  png_read_update_info(p, info);
  if (png_get_rowbytes(p, info) != stride)
    png_error(p, "unexpected row size after conversion to RGBX");
  if (passes > 1) {
    uint8_t *full = pl_scratch_get(j->scratch, PL_DECODE_SLOT_FULL,
                                   stride * d->height);
    png_bytep *rows =
        full ? pl_scratch_get(j->scratch, PL_DECODE_SLOT_ROWS,
                              d->height * sizeof *rows)
             : NULL;
    if (!rows) {
      j->oom = true;
      png_error(p, "out of memory");
    }
    for (uint32_t r = 0; r < d->height; r++)
      rows[r] = full + r * stride;
    png_read_image(p, rows);
    for (uint32_t r = 0; r < pl->h; r++)
      memcpy(d->rgbx + (size_t)r * pl->w * 4,
             full + (pl->y + r) * stride + (size_t)pl->x * 4,
             (size_t)pl->w * 4);
    return;
  }
  if (!(j->row = pl_scratch_get(j->scratch, PL_DECODE_SLOT_ROW, stride))) {
    j->oom = true;
    png_error(p, "out of memory");
  }
  for (uint32_t r = 0; r < pl->y + pl->h; r++) {
    png_read_row(p, j->row, NULL);
    if (r >= pl->y)
      memcpy(d->rgbx + (size_t)(r - pl->y) * pl->w * 4,
             j->row + (size_t)pl->x * 4, (size_t)pl->w * 4);
  }
}

static void png_run(png_structp p, png_infop info, png_job *j,
                    const char *path, pl_plan_fn plan, void *user,
                    pl_decoded *d, pl_status *st, pl_error *err) {
  png_set_read_fn(p, j, png_read_mem);
  png_set_user_limits(p, 1u << 16, 1u << 16);
  png_read_info(p, info);
  d->width = png_get_image_width(p, info);
  d->height = png_get_image_height(p, info);
  if ((*st = make_plan(path, d->width, d->height, 8, plan, user, &d->plan,
                       err)) != PL_OK)
    return;
  d->sw = d->width;
  d->sh = d->height;
  d->bx = d->plan.x;
  d->by = d->plan.y;
  d->bw = d->plan.w;
  d->bh = d->plan.h;
  if (!(d->rgbx = pl_scratch_get(j->scratch, PL_DECODE_SLOT_PIXELS,
                                 (size_t)d->bw * d->bh * 4))) {
    *st = pl_errorf(err, PL_NO_MEMORY, "%s: out of memory decoding", path);
    return;
  }
  png_set_rgbx8(p, info);
  png_rows(p, info, j, d);
  *st = PL_OK;
}

static pl_status decode_png(const uint8_t *data, size_t n, const char *path,
                            pl_plan_fn plan, void *user, pl_scratch *sc,
                            pl_decoded *d, pl_error *err) {
  png_job *j = pl_scratch_get(sc, PL_DECODE_SLOT_JOB, sizeof *j);
  if (!j)
    return pl_errorf(err, PL_NO_MEMORY, "%s: out of memory decoding", path);
  *j = (png_job){.data = data, .n = n, .scratch = sc};
  png_structp p = png_create_read_struct(PNG_LIBPNG_VER_STRING, j,
                                         png_on_error, png_on_warning);
  png_infop info = p ? png_create_info_struct(p) : NULL;
  pl_status st = PL_FORMAT;
  if (!info)
    st = pl_errorf(err, PL_NO_MEMORY, "%s: out of memory decoding", path);
  else if (setjmp(png_jmpbuf(p)) == 0)
    png_run(p, info, j, path, plan, user, d, &st, err);
  else
    st = pl_errorf(err, j->oom ? PL_NO_MEMORY : PL_FORMAT, "%s: PNG: %s",
                   path, j->msg);
  png_destroy_read_struct(p ? &p : NULL, info ? &info : NULL, NULL);
  return st;
}
#endif /* PL_HAVE_PNG */

pl_status pl_image_decode(const uint8_t *data, size_t n, const char *path,
                          pl_plan_fn plan, void *user, pl_scratch *scratch,
                          pl_decoded *out, pl_error *err) {
  memset(out, 0, sizeof *out);
  bool jpeg = n >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
  bool png = n >= 8 && !memcmp(data, "\x89PNG\r\n\x1a\n", 8);
  pl_status s;
  if (jpeg) {
#ifdef PL_HAVE_JPEG
    s = decode_jpeg(data, n, path, plan, user, scratch, out, err);
#else
    s = pl_errorf(err, PL_UNSUPPORTED,
                  "%s: this build has no JPEG decoder (install "
                  "libjpeg62-turbo-dev and rebuild)", path);
#endif
  } else if (png) {
#ifdef PL_HAVE_PNG
    s = decode_png(data, n, path, plan, user, scratch, out, err);
#else
    s = pl_errorf(err, PL_UNSUPPORTED,
                  "%s: this build has no PNG decoder (install libpng-dev "
                  "and rebuild)", path);
#endif
  } else if (n < 4) {
    s = pl_errorf(err, PL_FORMAT,
                  "%s: %zu bytes, too short for a JPEG or PNG file", path, n);
  } else {
    s = pl_errorf(err, PL_FORMAT,
                  "%s: not a JPEG or PNG file (it begins %02x %02x %02x "
                  "%02x)", path, data[0], data[1], data[2], data[3]);
  }
  if (s != PL_OK)
    memset(out, 0, sizeof *out); /* its pixels are the scratch's */
  return s;
}
