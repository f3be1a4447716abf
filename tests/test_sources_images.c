/* The image folder source: layout errors, list files, and hostile files
 * (wrong magic, truncated, absurd sizes) with their exact errors; a valid
 * PNG written with libpng's simplified API decodes to its exact pixels
 * when the crop is the whole image at its own size (the resize is then the
 * identity). PSNR against PIL lives in python/tests/test_sources.py. */
#include "data/dataset.h"
#include "testutil.h"

#include <png.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <zlib.h>

static void write_png(const char *path, uint32_t w, uint32_t h) {
  png_image img;
  memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  img.width = w, img.height = h, img.format = PNG_FORMAT_RGB;
  uint8_t *px = malloc((size_t)w * h * 3);
  for (size_t i = 0; i < (size_t)w * h * 3; i++)
    px[i] = pl_test_byte(i / 3, i % 3);
  CHECK(png_image_write_to_file(&img, path, 0, px, 0, NULL));
  free(px);
}

static void open_dir(const char *root, pl_status want, const char *msg,
                     pl_image_options *o, pl_dataset **out) {
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_STATUS(pl_dataset_open_images(root, o, &ds, &err), want, &err);
  if (msg)
    CHECK_MSG(&err, msg);
  if (out)
    *out = ds;
  else
    pl_dataset_destroy(ds);
}

static void test_exact_png_and_errors(void) {
  char root[512], cls[600], p[700];
  snprintf(root, sizeof root, "%s", pl_test_path("imgs"));
  pl_image_options o;
  pl_image_options_init(&o);
  CHECK(mkdir(root, 0755) == 0);
  open_dir(root, PL_FORMAT, "imgs: no class folders (want ROOT/CLASS/IMAGE.jpg)", &o, NULL);
  snprintf(cls, sizeof cls, "%s/c0", root);
  CHECK(mkdir(cls, 0755) == 0);
  open_dir(root, PL_FORMAT, "c0: no .jpg, .jpeg or .png files in class folder", &o, NULL);
  snprintf(p, sizeof p, "%s/a.png", cls);
  write_png(p, 16, 16);
  /* eval with resize == size == the image: the identity */
  o.size = 16, o.train = 0, o.resize = 16;
  pl_dataset *ds = NULL;
  open_dir(root, PL_OK, NULL, &o, &ds);
  if (ds) {
    uint8_t img[3 * 16 * 16];
    int64_t label = -1;
    void *dst[2] = {img, &label};
    pl_error err;
    CHECK_OK(pl_dataset_read(ds, 0, dst, &err), &err);
    CHECK(label == 0);
    int bad = 0;
    for (int c = 0; c < 3; c++)
      for (int i = 0; i < 256; i++)
        bad += img[c * 256 + i] != pl_test_byte((uint64_t)i, (uint64_t)c);
    CHECK(bad == 0);
    pl_dataset_destroy(ds);
  }
  /* hostile files: each read fails naming the file and the reason */
  struct {
    const char *name;
    const uint8_t *bytes;
    size_t n;
    const char *msg;
  } cases[] = {
      {"b.jpg", (const uint8_t *)"GIF89a....", 10, "b.jpg: not a JPEG or PNG file (it begins 47 49 46 38)"},
      {"c.jpg", (const uint8_t *)"\xff\xd8\xff\xe0\x00\x10JFIF", 10, "c.jpg: JPEG: "},
      {"d.png", (const uint8_t *)"\x89PNG\r\n\x1a\n\0\0", 10, "d.png: PNG: the file is truncated"},
      {"e.jpg", (const uint8_t *)"\xff", 1, "e.jpg: 1 bytes, too short for a JPEG or PNG file"},
  };
  o.train = 1, o.size = 8;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    snprintf(p, sizeof p, "%s/%s", cls, cases[k].name);
    CHECK(pl_test_write_file(p, cases[k].bytes, cases[k].n) == 0);
    char lst[700];
    snprintf(lst, sizeof lst, "%s/one.txt", root);
    char line[800];
    snprintf(line, sizeof line, "c0/%s 1\n", cases[k].name);
    CHECK(pl_test_write_file(lst, line, strlen(line)) == 0);
    open_dir(lst, PL_OK, NULL, &o, &ds);
    if (!ds)
      continue;
    uint8_t img[3 * 8 * 8];
    int64_t label;
    void *dst[2] = {img, &label};
    pl_error err;
    CHECK_STATUS(pl_dataset_read(ds, 0, dst, &err), PL_FORMAT, &err);
    CHECK_MSG(&err, cases[k].msg);
    pl_dataset_destroy(ds);
  }
  /* A PNG header claiming 60000 x 60000 pixels: refused before decoding. */
  uint8_t big[41] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13,
                     'I', 'H', 'D', 'R', 0, 0, 0xea, 0x60, 0, 0, 0xea, 0x60,
                     8, 2, 0, 0, 0};
  uint32_t crc = (uint32_t)crc32(0, big + 12, 17);
  big[29] = (uint8_t)(crc >> 24), big[30] = (uint8_t)(crc >> 16);
  big[31] = (uint8_t)(crc >> 8), big[32] = (uint8_t)crc;
  memcpy(big + 33, "\0\0\0\0IDAT", 8); /* png_read_info stops here */
  snprintf(p, sizeof p, "%s/c0/a.png", root);
  CHECK(pl_test_write_file(p, big, sizeof big) == 0);
  char lst[700];
  snprintf(lst, sizeof lst, "%s/one.txt", root);
  CHECK(pl_test_write_file(lst, "c0/a.png 0\n", 11) == 0);
  open_dir(lst, PL_OK, NULL, &o, &ds);
  if (ds) {
    uint8_t img[3 * 8 * 8];
    int64_t label;
    void *dst[2] = {img, &label};
    pl_error err;
    CHECK_STATUS(pl_dataset_read(ds, 0, dst, &err), PL_FORMAT, &err);
    CHECK_MSG(&err, "a.png: the image is 60000x60000 pixels (from 1 to 134217728 pixels are accepted)");
    pl_dataset_destroy(ds);
  }
  CHECK(pl_test_write_file(lst, "c0/a.png\n", 9) == 0);
  open_dir(lst, PL_FORMAT, "one.txt:1: want 'PATH LABEL' with a label >= 0", &o, NULL);
  o.scale_min = 0;
  open_dir(root, PL_INVALID_ARGUMENT, "images: scale 0:1 (want 0 < min <= max <= 1)", &o, NULL);
  pl_dataset *sds = NULL;
  pl_error err;
  CHECK_STATUS(pl_dataset_open_spec("images:/x?size=10&zoom=2", &sds, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK_MSG(&err, "images: unknown option 'zoom'");
  CHECK_STATUS(pl_dataset_open_spec("images:/nonexistent/dir?size=10", &sds, &err),
               PL_IO, &err);
  CHECK_MSG(&err, "/nonexistent/dir: No such file or directory");
}

int main(void) {
  test_exact_png_and_errors();
  return pl_test_finish("test_sources_images");
}
