/* JPEG and PNG files for the image tests, written through the codecs
 * (PL_HAVE_JPEG / PL_HAVE_PNG builds only): a smooth pattern per image
 * (so that it compresses as photos do), and the JPEG variants the GPU
 * path must tell apart: baseline 4:2:0, progressive, grayscale, CMYK,
 * and two the header probe passes but a decoder may refuse: extended
 * sequential (16-bit tables) and sequential in three scans. */
#ifndef PL_TEST_IMAGE_FIXTURE_H
#define PL_TEST_IMAGE_FIXTURE_H

#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>

typedef enum {
  FX_JPEG_BASELINE = 0,
  FX_JPEG_PROGRESSIVE,
  FX_JPEG_GRAY,
  FX_JPEG_CMYK,
  FX_JPEG_EXTENDED, /* quality 3: 16-bit quantization tables, SOF1 */
  FX_JPEG_SCANS     /* sequential, one scan per component (not interleaved) */
} fx_jpeg_kind;

/* Smooth waves per channel, as photos' gradients are (a sawtooth that
 * wraps from 255 to 0 every few dozen pixels is not: two correct JPEG
 * decoders, whose chroma upsampling differs, then disagree at 28-34 dB on
 * its edges). */
static inline uint8_t fx_pixel(uint32_t i, uint32_t x, uint32_t y,
                               uint32_t c) {
  double fx = (double)x, fy = (double)y, v;
  if (c == 0)
    v = 128 + 100 * sin(fx / (17.0 + i % 9) + fy / 29.0);
  else if (c == 1)
    v = 128 + 90 * cos(fy / (13.0 + i % 5)) * sin(fx / 41.0);
  else
    v = 128 + 60 * sin((fx + fy) / 23.0 + i);
  return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v + 0.5);
}

/* libjpeg's warnings (quality 3 is "too coarse for baseline"): none. */
static inline void fx_quiet(j_common_ptr c, int level) { (void)c, (void)level; }

static inline void fx_write_jpeg(const char *path, uint32_t i, uint32_t w,
                                 uint32_t h, fx_jpeg_kind kind) {
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  if (!f)
    return;
  struct jpeg_compress_struct ci;
  struct jpeg_error_mgr je;
  ci.err = jpeg_std_error(&je);
  je.emit_message = fx_quiet;
  jpeg_create_compress(&ci);
  jpeg_stdio_dest(&ci, f);
  ci.image_width = w, ci.image_height = h;
  ci.input_components = kind == FX_JPEG_GRAY ? 1 : kind == FX_JPEG_CMYK ? 4 : 3;
  ci.in_color_space = kind == FX_JPEG_GRAY   ? JCS_GRAYSCALE
                      : kind == FX_JPEG_CMYK ? JCS_CMYK
                                             : JCS_RGB;
  jpeg_set_defaults(&ci);
  jpeg_set_quality(&ci, kind == FX_JPEG_EXTENDED ? 3 : 90,
                   kind != FX_JPEG_EXTENDED);
  if (kind == FX_JPEG_PROGRESSIVE)
    jpeg_simple_progression(&ci);
  static jpeg_scan_info scans[3]; /* FX_JPEG_SCANS: Y, Cb, Cr, 0..63 each */
  if (kind == FX_JPEG_SCANS) {
    for (int c = 0; c < 3; c++)
      scans[c] = (jpeg_scan_info){1, {c, 0, 0, 0}, 0, 63, 0, 0};
    ci.scan_info = scans;
    ci.num_scans = 3;
  }
  jpeg_start_compress(&ci, TRUE);
  int nc = ci.input_components;
  uint8_t *row = malloc((size_t)w * (size_t)nc);
  for (uint32_t y = 0; y < h; y++) {
    for (uint32_t x = 0; x < w; x++)
      for (int c = 0; c < nc; c++)
        row[x * (uint32_t)nc + (uint32_t)c] = fx_pixel(i, x, y, (uint32_t)c);
    JSAMPROW r = row;
    jpeg_write_scanlines(&ci, &r, 1);
  }
  jpeg_finish_compress(&ci);
  jpeg_destroy_compress(&ci);
  free(row);
  fclose(f);
}

/* A copy of JPEG b[0..n) without its segments of `marker` (DQT 0xDB, DHT
 * 0xC4) before the first scan; *out_n its length. */
static inline uint8_t *fx_jpeg_without(const uint8_t *b, size_t n,
                                       uint8_t marker, size_t *out_n) {
  uint8_t *o = malloc(n);
  CHECK(o && n > 4);
  if (!o || n <= 4)
    return o;
  size_t i = 2, k = 2;
  memcpy(o, b, 2); /* SOI */
  while (i + 4 <= n && b[i] == 0xFF && b[i + 1] != 0xDA) {
    size_t len = 2 + ((size_t)b[i + 2] << 8 | b[i + 3]);
    if (b[i + 1] != marker) {
      memcpy(o + k, b + i, len);
      k += len;
    }
    i += len;
  }
  memcpy(o + k, b + i, n - i); /* SOS, the scan, EOI */
  *out_n = k + n - i;
  return o;
}

static inline void fx_write_png(const char *path, uint32_t i, uint32_t w,
                                uint32_t h) {
  png_image img;
  memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  img.width = w, img.height = h, img.format = PNG_FORMAT_RGB;
  uint8_t *px = malloc((size_t)w * h * 3);
  for (uint32_t y = 0; y < h; y++)
    for (uint32_t x = 0; x < w; x++)
      for (uint32_t c = 0; c < 3; c++)
        px[((size_t)y * w + x) * 3 + c] = fx_pixel(i, x, y, c);
  CHECK(png_image_write_to_file(&img, path, 0, px, 0, NULL));
  free(px);
}

/* The whole file, malloc'd; NULL on failure. */
static inline uint8_t *fx_read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = len > 0 ? malloc((size_t)len) : NULL;
  if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
    free(b);
    b = NULL;
  }
  fclose(f);
  *n = b ? (size_t)len : 0;
  return b;
}

#endif /* PL_TEST_IMAGE_FIXTURE_H */
