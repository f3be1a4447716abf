/* The native sources through a CUDA loader: token windows (random and
 * strided, int64 and the file's own uint16, a window of 80 KB that direct
 * mode copies straight from the page-locked file), NumPy arrays (.npy
 * files zipped, and an .npz) and an image folder (JPEG and PNG, grayscale
 * too, random crops and flips, the crop field): for each, the bytes read
 * back from device memory equal the CPU backend's bytes for the same
 * (seed, epoch) order, batch by batch, over two shuffled epochs, with
 * pinned and pageable staging, chunked copies, and other worker counts
 * than the CPU loader's (per-sample randomness depends on (seed, epoch,
 * index) alone). Exits 77 (skip) without CUDA or a usable GPU; the image
 * folder is skipped (said so) in a build without the codecs. */
#include "testutil.h"

#ifndef PL_HAVE_CUDA
int main(void) {
  printf("test_gpu_sources: built without CUDA, skipped\n");
  return 77;
}
#else

#include <stdlib.h>
#include <sys/stat.h>

/* The backend the loaders under test use; PL_TEST_SOURCES_DEVICE=cpu runs
 * the same comparisons CPU against CPU, to check the test itself on a
 * machine without a GPU. */
static pl_device_kind g_dev = PL_DEVICE_CUDA;

#ifdef PL_HAVE_JPEG
#include <jpeglib.h>
#include <png.h>
#endif

/* ---------------------------------------------------------------- compare */

/* One way to run a loader on the device. */
typedef struct variant {
  const char *name;
  int workers, pin, direct;
  uint64_t chunk;
} variant;

static const variant k_variants[] = {
    {"pinned, 3 workers", 3, 1, 0, 0},
    {"pageable, 1 worker", 1, 0, 0, 0},
    {"pinned, chunks of 1000 bytes, 2 workers", 2, 1, 0, 1000},
    {"pinned, direct copies, 4 workers", 4, 1, 1, 0},
};

static pl_loader *make_loader(pl_dataset *ds, pl_device_kind dev,
                              const variant *v, uint32_t bs, uint64_t epoch) {
  pl_loader_config c;
  pl_loader_config_init(&c);
  c.batch_size = bs;
  c.shuffle = 1;
  c.seed = 1234;
  c.epoch = epoch;
  c.device = dev;
  c.device_index = 0;
  c.num_workers = v ? v->workers : 2;
  c.pin_memory = v ? v->pin : 0;
  c.direct_copy = v ? v->direct : 0;
  c.copy_chunk_bytes = v ? v->chunk : 0;
  pl_loader *ld = NULL;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, &c, &ld, &err), &err);
  return ld;
}

/* Every field of the device batch read back equals the CPU batch's bytes;
 * returns the number of differing fields. */
static int compare_batches(pl_batch *cpu, pl_batch *gpu, int nfields) {
  uint32_t n = pl_batch_size(cpu);
  CHECK_EQ_U64(pl_batch_size(gpu), n);
  for (uint32_t i = 0; i < n && i < pl_batch_size(gpu); i++)
    CHECK_EQ_U64(pl_batch_sample_index(gpu, i), pl_batch_sample_index(cpu, i));
  int bad = 0;
  for (int f = 0; f < nfields; f++) {
    uint64_t bytes = pl_batch_bytes(cpu, f);
    CHECK_EQ_U64(pl_batch_bytes(gpu, f), bytes);
    uint8_t *back = malloc(bytes ? bytes : 1);
    pl_error err;
    pl_status s = pl_batch_copy_to_host(gpu, f, 0, back, bytes, &err);
    CHECK_OK(s, &err);
    if (s != PL_OK || memcmp(back, pl_batch_data(cpu, f), bytes) != 0) {
      fprintf(stderr, "field %d of batch %llu differs\n", f,
              (unsigned long long)pl_batch_index(cpu));
      bad++;
    }
    free(back);
  }
  return bad;
}

/* Two epochs of the CPU loader against the device loader of `v`. */
static void compare_epochs(const char *what, pl_dataset *ds, uint32_t bs,
                           const variant *v) {
  int nfields = pl_dataset_num_fields(ds);
  uint64_t batches = 0, bad = 0;
  for (uint64_t epoch = 0; epoch < 2; epoch++) {
    pl_loader *cpu = make_loader(ds, PL_DEVICE_CPU, NULL, bs, epoch);
    pl_loader *gpu = make_loader(ds, g_dev, v, bs, epoch);
    if (!cpu || !gpu) {
      pl_loader_destroy(cpu);
      pl_loader_destroy(gpu);
      return;
    }
    for (;;) {
      pl_batch *a = NULL, *b = NULL;
      pl_error ea, eb;
      pl_status sa = pl_loader_next(cpu, &a, &ea);
      pl_status sb = pl_loader_next(gpu, &b, &eb);
      CHECK_EQ_U64(sb, sa);
      if (sa != PL_OK || sb != PL_OK) {
        CHECK_STATUS(sa, PL_END_OF_EPOCH, &ea);
        CHECK_STATUS(sb, PL_END_OF_EPOCH, &eb);
        pl_batch_release(a, NULL);
        pl_batch_release(b, NULL);
        break;
      }
      CHECK(pl_batch_device(b, NULL) == g_dev);
      bad += compare_batches(a, b, nfields) != 0;
      batches++;
      pl_batch_release(a, NULL);
      pl_batch_release(b, NULL);
    }
    pl_loader_stats st;
    pl_loader_stats_get(gpu, &st);
    if (v->direct && epoch == 1)
      printf("  %s, %s: %llu batches copied direct\n", what, v->name,
             (unsigned long long)st.batches_direct);
    pl_loader_destroy(cpu);
    pl_loader_destroy(gpu);
  }
  CHECK(batches > 0);
  CHECK_EQ_U64(bad, 0);
  printf("%s, %s: %llu batches equal\n", what, v->name,
         (unsigned long long)batches);
}

static void compare_all(const char *what, pl_dataset *ds, uint32_t bs) {
  if (!ds)
    return;
  for (size_t i = 0; i < sizeof k_variants / sizeof k_variants[0]; i++)
    compare_epochs(what, ds, bs, &k_variants[i]);
  pl_dataset_destroy(ds);
}

static pl_dataset *open_spec(const char *spec) {
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_spec(spec, &ds, &err), &err);
  return ds;
}

/* ---------------------------------------------------------------- tokens */

static void write_tokens(const char *path, uint32_t n, uint32_t salt) {
  uint16_t *t = malloc((size_t)n * sizeof *t);
  for (uint32_t i = 0; i < n; i++)
    t[i] = (uint16_t)(pl_test_byte(i, salt) | pl_test_byte(i, salt + 1) << 8);
  CHECK(pl_test_write_file(path, t, (size_t)n * sizeof *t) == 0);
  free(t);
}

static void test_tokens(void) {
  char a[512], b[512], spec[1400];
  snprintf(a, sizeof a, "%s", pl_test_path("a.bin"));
  snprintf(b, sizeof b, "%s", pl_test_path("b.bin"));
  write_tokens(a, 200000, 1);
  write_tokens(b, 123457, 2); /* a tail that fills no window */
  snprintf(spec, sizeof spec, "tokens:%s,%s?context=1024&samples=300", a, b);
  compare_all("tokens, random windows, int64", open_spec(spec), 32);
  snprintf(spec, sizeof spec, "tokens:%s,%s?context=512&dtype=uint16", a, b);
  compare_all("tokens, strided, uint16 views", open_spec(spec), 16);
  /* 40,000 uint16 tokens = 80 KB a window: direct mode's size. */
  snprintf(spec, sizeof spec, "tokens:%s,%s?context=40000&dtype=uint16", a, b);
  compare_all("tokens, 80 KB windows, uint16 views", open_spec(spec), 2);
}

/* ---------------------------------------------------------------- npy */

static void write_npy(const char *path, const char *descr, const char *shape,
                      const void *data, size_t n) {
  char dict[256];
  int dl = snprintf(dict, sizeof dict,
                    "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                    descr, shape);
  size_t hl = ((10 + (size_t)dl + 1 + 63) / 64) * 64 - 10;
  uint8_t *buf = malloc(10 + hl + n);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (uint8_t)hl, buf[9] = (uint8_t)(hl >> 8);
  memset(buf + 10, ' ', hl);
  memcpy(buf + 10, dict, (size_t)dl);
  buf[10 + hl - 1] = '\n';
  memcpy(buf + 10 + hl, data, n);
  CHECK(pl_test_write_file(path, buf, 10 + hl + n) == 0);
  free(buf);
}

static void test_npy(void) {
  enum { N = 301 };
  char x[512], y[512], big[512], spec[1800];
  snprintf(x, sizeof x, "%s", pl_test_path("x.npy"));
  snprintf(y, sizeof y, "%s", pl_test_path("y.npy"));
  snprintf(big, sizeof big, "%s", pl_test_path("big.npy"));
  float *xs = malloc(N * 5 * 3 * sizeof *xs);
  int64_t *ys = malloc(N * sizeof *ys);
  for (int i = 0; i < N * 15; i++)
    xs[i] = (float)pl_test_byte((uint64_t)i, 7) / 7.0f - 3.0f;
  for (int i = 0; i < N; i++)
    ys[i] = (int64_t)pl_test_byte((uint64_t)i, 9) * 1000 - 5;
  write_npy(x, "<f4", "(301, 5, 3)", xs, N * 15 * sizeof *xs);
  write_npy(y, "<i8", "(301,)", ys, N * sizeof *ys);
  /* 64 KiB rows: direct-copy eligible views of the mapping. */
  size_t row = 65536;
  uint8_t *bs = malloc(40 * row);
  for (size_t i = 0; i < 40 * row; i++)
    bs[i] = pl_test_byte(i / row, i % row);
  write_npy(big, "|u1", "(40, 65536)", bs, 40 * row);
  snprintf(spec, sizeof spec, "npy:%s,%s", x, y);
  compare_all("npy, float32 x and int64 y", open_spec(spec), 16);
  snprintf(spec, sizeof spec, "npy:%s", big);
  compare_all("npy, 64 KiB uint8 rows", open_spec(spec), 3);
  free(xs);
  free(ys);
  free(bs);
}

/* ---------------------------------------------------------------- images */
#ifdef PL_HAVE_JPEG

/* Pixel (x, y) channel c of image i: smooth enough to compress. */
static uint8_t pixel(uint32_t i, uint32_t x, uint32_t y, uint32_t c) {
  return (uint8_t)((x * (3 + c) + y * (5 + i % 7) + i * 31 + c * 60) & 0xff);
}

static void write_jpeg(const char *path, uint32_t i, uint32_t w, uint32_t h,
                       int gray) {
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  if (!f)
    return;
  struct jpeg_compress_struct ci;
  struct jpeg_error_mgr je;
  ci.err = jpeg_std_error(&je);
  jpeg_create_compress(&ci);
  jpeg_stdio_dest(&ci, f);
  ci.image_width = w, ci.image_height = h;
  ci.input_components = gray ? 1 : 3;
  ci.in_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&ci);
  jpeg_set_quality(&ci, 90, TRUE);
  jpeg_start_compress(&ci, TRUE);
  uint8_t *row = malloc((size_t)w * 3);
  for (uint32_t y = 0; y < h; y++) {
    for (uint32_t x = 0; x < w; x++)
      for (int c = 0; c < ci.input_components; c++)
        row[x * (uint32_t)ci.input_components + (uint32_t)c] = pixel(i, x, y, (uint32_t)c);
    JSAMPROW r = row;
    jpeg_write_scanlines(&ci, &r, 1);
  }
  jpeg_finish_compress(&ci);
  jpeg_destroy_compress(&ci);
  free(row);
  fclose(f);
}

static void write_png(const char *path, uint32_t i, uint32_t w, uint32_t h) {
  png_image img;
  memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  img.width = w, img.height = h, img.format = PNG_FORMAT_RGB;
  uint8_t *px = malloc((size_t)w * h * 3);
  for (uint32_t y = 0; y < h; y++)
    for (uint32_t x = 0; x < w; x++)
      for (uint32_t c = 0; c < 3; c++)
        px[((size_t)y * w + x) * 3 + c] = pixel(i, x, y, c);
  CHECK(png_image_write_to_file(&img, path, 0, px, 0, NULL));
  free(px);
}

static void test_images(void) {
  char root[512], dir[600], p[700], spec[800];
  snprintf(root, sizeof root, "%s", pl_test_path("imgs"));
  CHECK(mkdir(root, 0755) == 0);
  for (uint32_t i = 0; i < 45; i++) {
    snprintf(dir, sizeof dir, "%s/c%u", root, i % 3);
    mkdir(dir, 0755);
    uint32_t w = 40 + (i * 37) % 200, h = 30 + (i * 53) % 150;
    if (i % 5 == 4) {
      snprintf(p, sizeof p, "%s/i%02u.png", dir, i);
      write_png(p, i, w, h);
    } else {
      snprintf(p, sizeof p, "%s/i%02u.jpg", dir, i);
      write_jpeg(p, i, w, h, i % 7 == 3);
    }
  }
  /* Crops at DCT scales (size 24 of images up to 240 wide) and not. */
  snprintf(spec, sizeof spec, "images:%s?size=24&crop_field=1", root);
  compare_all("images, train crops + flips, DCT scaling", open_spec(spec), 8);
  snprintf(spec, sizeof spec, "images:%s?size=32&dct=0", root);
  compare_all("images, train crops, no DCT scaling", open_spec(spec), 8);
  snprintf(spec, sizeof spec, "images:%s?size=28&train=0", root);
  compare_all("images, eval resize + center crop", open_spec(spec), 8);
}
#endif

int main(void) {
  const char *dev = getenv("PL_TEST_SOURCES_DEVICE");
  if (dev && !strcmp(dev, "cpu"))
    g_dev = PL_DEVICE_CPU;
  else if (pl_cuda_device_count() < 1) {
    printf("test_gpu_sources: no usable GPU, skipped\n");
    return 77;
  }
  test_tokens();
  test_npy();
#ifdef PL_HAVE_JPEG
  test_images();
#else
  printf("test_gpu_sources: built without the image codecs: image folder "
         "not checked\n");
#endif
  return pl_test_finish("test_gpu_sources");
}
#endif /* PL_HAVE_CUDA */
