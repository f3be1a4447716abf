/* The resize kernels: the vector path (SSE2 on x86-64) gives exactly the
 * plain C path's bytes, for sizes that leave tails in every loop (output
 * widths and heights not multiples of 16 or 4, odd and even tap counts,
 * upscales and downscales, crops whose window stops at the image edge);
 * the flip is the exact mirror of the unflipped output; a constant image
 * stays constant (the weights sum to one). Closeness to PIL is tested in
 * python/tests/test_sources.py. */
#include "core/scratch.h"
#include "data/image_resize.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static uint8_t *random_rgbx(uint32_t w, uint32_t h, uint32_t seed) {
  uint8_t *px = malloc((size_t)w * h * 4);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < (size_t)w * h * 4; i++) {
    x = x * 1664525u + 1013904223u;
    px[i] = (uint8_t)(x >> 24);
  }
  return px;
}

/* The box [bx0, bx1) x [by0, by1) of a w x h image, filter window the box
 * rounded out (as the images source does for a crop). */
static pl_resize_src source(const uint8_t *px, uint32_t w, uint32_t h,
                            double bx0, double by0, double bx1, double by1) {
  pl_resize_src s = {.rgbx = px, .w = w, .h = h,
                     .box_x0 = bx0, .box_y0 = by0,
                     .box_x1 = bx1, .box_y1 = by1};
  s.x0 = (uint32_t)bx0, s.y0 = (uint32_t)by0;
  s.x1 = PL_MIN((uint32_t)(bx1 + 0.999), w);
  s.y1 = PL_MIN((uint32_t)(by1 + 0.999), h);
  return s;
}

static void check_case(const pl_resize_src *s, uint32_t ow, uint32_t oh) {
  size_t n = (size_t)3 * ow * oh;
  uint8_t *a = malloc(n), *b = malloc(n), *f = malloc(n);
  pl_scratch sc = {0};
  pl_error err;
  for (int flip = 0; flip < 2; flip++) {
    CHECK_OK(pl_resize_rgbx(s, ow, oh, flip, a, &sc, 0, &err), &err);
    CHECK_OK(pl_resize_rgbx_generic(s, ow, oh, flip, b, &sc, 0, &err), &err);
    if (memcmp(a, b, n) != 0)
      fprintf(stderr, "vector != generic for %ux%u -> %ux%u flip %d\n",
              s->w, s->h, ow, oh, flip);
    CHECK(memcmp(a, b, n) == 0);
    if (flip == 0)
      memcpy(f, a, n);
  }
  /* a is the flipped output now, f the unflipped one */
  size_t mirrored = 0;
  for (size_t row = 0; row < (size_t)3 * oh; row++)
    for (uint32_t x = 0; x < ow; x++)
      mirrored += a[row * ow + x] == f[row * ow + (ow - 1 - x)];
  CHECK_EQ_U64(mirrored, n);
  pl_scratch_release_all(&sc);
  free(a), free(b), free(f);
}

static void test_vector_matches_generic(void) {
  static const struct {
    uint32_t w, h, ow, oh;
    double bx0, by0, bx1, by1;
  } cases[] = {
      {500, 375, 224, 224, 37.5, 20.25, 460.0, 370.5}, /* ~2x down */
      {640, 480, 224, 224, 0, 0, 640, 480},            /* whole image */
      {300, 200, 37, 53, 11.0, 7.0, 129.0, 161.0},     /* odd sizes */
      {64, 48, 100, 90, 3.5, 2.5, 60.0, 47.0},         /* upscale */
      {97, 61, 17, 5, 0, 0, 97, 61},                   /* many taps */
      {40, 30, 16, 4, 39.0, 29.0, 40.0, 30.0},         /* one pixel */
      {1000, 20, 33, 20, 0, 0, 1000, 20},               /* wide */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint8_t *px = random_rgbx(cases[i].w, cases[i].h, (uint32_t)i);
    pl_resize_src s = source(px, cases[i].w, cases[i].h, cases[i].bx0,
                             cases[i].by0, cases[i].bx1, cases[i].by1);
    check_case(&s, cases[i].ow, cases[i].oh);
    free(px);
  }
}

static void test_constant_stays_constant(void) {
  uint32_t w = 123, h = 77, ow = 45, oh = 38;
  uint8_t *px = malloc((size_t)w * h * 4), *out = malloc((size_t)3 * ow * oh);
  for (size_t i = 0; i < (size_t)w * h; i++)
    memcpy(px + 4 * i, (const uint8_t[4]){200, 17, 255, 255}, 4);
  pl_resize_src s = source(px, w, h, 1.5, 2.5, 120.0, 70.0);
  pl_scratch sc = {0};
  pl_error err;
  CHECK_OK(pl_resize_rgbx(&s, ow, oh, true, out, &sc, 0, &err), &err);
  size_t right = 0, plane = (size_t)ow * oh;
  for (size_t i = 0; i < plane; i++)
    right += out[i] == 200 && out[plane + i] == 17 && out[2 * plane + i] == 255;
  CHECK_EQ_U64(right, plane);
  pl_scratch_release_all(&sc);
  free(px), free(out);
}

int main(void) {
  test_vector_matches_generic();
  test_constant_stays_constant();
  return pl_test_finish("test_image_resize");
}
