/* The image folder source: layout errors, list files, and hostile files
 * (wrong magic, truncated, absurd sizes) with their exact errors; a valid
 * PNG written with libpng's simplified API decodes to its exact pixels
 * when the crop is the whole image at its own size (the resize is then the
 * identity). PSNR against PIL lives in python/tests/test_sources.py. */
#include "data/dataset.h"
#include "testutil.h"

#ifndef PL_HAVE_PNG
int main(void) {
  printf("test_sources_images: built without the image codecs, skipped\n");
  return 77;
}
#else

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

/* Image i of the reuse test: w x h by i. */
static void reuse_size(uint32_t i, uint32_t *w, uint32_t *h) {
  *w = 20 + (i * 67) % 300;
  *h = 17 + (i * 41) % 200;
}

enum { REUSE_N = 12, REUSE_S = 20, REUSE_IMG = 3 * REUSE_S * REUSE_S };

/* Sample i of spec read from a fresh dataset each (a fresh scratch), for
 * i < n; sample `bad` must fail. */
static void fresh_reads(const char *spec, uint32_t n, uint32_t bad,
                        const pl_sample_ctx *ctx,
                        uint8_t (*want)[REUSE_IMG]) {
  pl_error err;
  for (uint32_t i = 0; i < n; i++) {
    pl_dataset *ds = NULL;
    CHECK_OK(pl_dataset_open_spec(spec, &ds, &err), &err);
    int64_t label;
    void *dst[2] = {want[i], &label};
    if (ds)
      CHECK_STATUS(pl_dataset_read_sample(ds, i, ctx, dst, &err),
                   i == bad ? PL_FORMAT : PL_OK, &err);
    pl_dataset_destroy(ds);
  }
}

/* Decode buffers are reused from sample to sample (a pool of scratches in
 * the dataset): reads of big and small images interleaved, from one
 * thread or from loader workers, give exactly the bytes of a fresh
 * dataset's read, and a failed read in between leaves no trace. */
static void test_scratch_reuse(void) {
  enum { N = REUSE_N, IMG = REUSE_IMG };
  char root[512], cls[600], p[700], spec[800];
  snprintf(root, sizeof root, "%s", pl_test_path("reuse"));
  snprintf(cls, sizeof cls, "%s/c", root);
  CHECK(mkdir(root, 0755) == 0 && mkdir(cls, 0755) == 0);
  for (uint32_t i = 0; i < N; i++) {
    uint32_t w, h;
    reuse_size(i, &w, &h);
    snprintf(p, sizeof p, "%s/%02u.png", cls, i);
    if (i == 5)
      CHECK(pl_test_write_file(p, "\x89PNG\r\n\x1a\n\0", 9) == 0);
    else
      write_png(p, w, h);
  }
  snprintf(spec, sizeof spec, "images:%s?size=%d", root, REUSE_S);
  static uint8_t want[N][IMG];
  pl_sample_ctx ctx = {7, 3, NULL};
  fresh_reads(spec, N, 5, &ctx, want);
  pl_error err;
  pl_dataset *ds = NULL;
  CHECK_OK(pl_dataset_open_spec(spec, &ds, &err), &err);
  if (!ds)
    return;
  int bad = 0;
  for (uint32_t k = 0; k < 3 * N; k++) { /* big and small interleaved */
    uint32_t i = (k * 7) % N;
    uint8_t got[IMG];
    int64_t label;
    void *dst[2] = {got, &label};
    pl_status st = pl_dataset_read_sample(ds, i, &ctx, dst, &err);
    CHECK_STATUS(st, i == 5 ? PL_FORMAT : PL_OK, &err);
    bad += st == PL_OK && memcmp(got, want[i], IMG) != 0;
  }
  CHECK_EQ_U64(bad, 0);
  pl_dataset_destroy(ds);
  /* Three workers share the pool (the broken file gone). */
  snprintf(p, sizeof p, "%s/05.png", cls);
  CHECK(unlink(p) == 0);
  fresh_reads(spec, N - 1, N, &ctx, want);
  CHECK_OK(pl_dataset_open_spec(spec, &ds, &err), &err);
  if (!ds)
    return;
  pl_loader_config c;
  pl_loader_config_init(&c);
  c.batch_size = 2, c.num_workers = 3, c.seed = 7, c.epoch = 3;
  c.shuffle = 1, c.device = PL_DEVICE_CPU;
  pl_loader *ld = NULL;
  CHECK_OK(pl_loader_create(ds, &c, &ld, &err), &err);
  pl_batch *b;
  uint64_t seen = 0;
  while (ld && pl_loader_next(ld, &b, &err) == PL_OK) {
    for (uint32_t j = 0; j < pl_batch_size(b); j++) {
      uint64_t idx = pl_batch_sample_index(b, j);
      const uint8_t *img = (const uint8_t *)pl_batch_data(b, 0) + j * IMG;
      CHECK(idx < N - 1 && memcmp(img, want[idx], IMG) == 0);
      seen++;
    }
    pl_batch_release(b, NULL);
  }
  CHECK_EQ_U64(seen, N - 1);
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
}

#ifdef PL_FAULT_INJECTION
#include "core/fault.h"

/* Each of a read's allocations failing in turn gives PL_NO_MEMORY naming
 * the cause, and the next read (buffers regrown) the exact bytes. */
static void test_alloc_faults(void) {
  char root[512], cls[600], p[700], spec[800];
  snprintf(root, sizeof root, "%s", pl_test_path("faults"));
  snprintf(cls, sizeof cls, "%s/c", root);
  CHECK(mkdir(root, 0755) == 0 && mkdir(cls, 0755) == 0);
  snprintf(p, sizeof p, "%s/a.png", cls);
  write_png(p, 50, 40);
  snprintf(spec, sizeof spec, "images:%s?size=16", root);
  pl_sample_ctx ctx = {1, 0, NULL};
  uint8_t want[3 * 16 * 16], got[3 * 16 * 16];
  int64_t label;
  pl_error err;
  pl_dataset *ds = NULL;
  CHECK_OK(pl_dataset_open_spec(spec, &ds, &err), &err);
  if (!ds)
    return;
  void *dw[2] = {want, &label}, *dg[2] = {got, &label};
  CHECK_OK(pl_dataset_read_sample(ds, 0, &ctx, dw, &err), &err);
  pl_dataset_destroy(ds);
  int failed = 0;
  for (long k = 0; k < 16; k++) {
    CHECK_OK(pl_dataset_open_spec(spec, &ds, &err), &err);
    if (!ds)
      return;
    pl_fault_arm(PL_FAULT_ALLOC, k, 1);
    pl_status s = pl_dataset_read_sample(ds, 0, &ctx, dg, &err);
    pl_fault_reset();
    if (s != PL_OK) {
      CHECK_STATUS(s, PL_NO_MEMORY, &err);
      CHECK_MSG(&err, "out of memory");
      failed++;
    }
    memset(got, 0, sizeof got);
    CHECK_OK(pl_dataset_read_sample(ds, 0, &ctx, dg, &err), &err);
    CHECK(memcmp(got, want, sizeof got) == 0);
    pl_dataset_destroy(ds);
  }
  CHECK(failed >= 5); /* scratch, file, pixels, row, job, weights, rows */
}
#endif

/* Gray and RGBA PNGs decode to the RGB PIL's convert("RGB") gives: gray
 * replicated, alpha dropped (not composited), at the identity resize. */
static void test_png_gray_and_alpha(void) {
  static const struct {
    const char *name;
    uint32_t format, channels;
  } kinds[] = {{"gray", PNG_FORMAT_GRAY, 1}, {"rgba", PNG_FORMAT_RGBA, 4}};
  for (size_t n = 0; n < sizeof kinds / sizeof kinds[0]; n++) {
    char root[512], cls[600], p[700];
    snprintf(root, sizeof root, "%s", pl_test_path(kinds[n].name));
    snprintf(cls, sizeof cls, "%s/c", root);
    CHECK(mkdir(root, 0755) == 0 && mkdir(cls, 0755) == 0);
    snprintf(p, sizeof p, "%s/a.png", cls);
    enum { W = 12, H = 10 };
    uint32_t ch = kinds[n].channels;
    uint8_t px[W * H * 4], img[3 * W * H];
    for (size_t i = 0; i < (size_t)W * H * ch; i++)
      px[i] = pl_test_byte(i / ch, i % ch);
    png_image pi;
    memset(&pi, 0, sizeof pi);
    pi.version = PNG_IMAGE_VERSION;
    pi.width = W, pi.height = H, pi.format = kinds[n].format;
    CHECK(png_image_write_to_file(&pi, p, 0, px, 0, NULL));
    pl_image_options o;
    pl_image_options_init(&o);
    o.size = H, o.train = 0, o.resize = H; /* W > H: the center crop */
    pl_dataset *ds = NULL;
    open_dir(root, PL_OK, NULL, &o, &ds);
    if (!ds)
      continue;
    int64_t label = -1;
    void *dst[2] = {img, &label};
    pl_error err;
    CHECK_OK(pl_dataset_read(ds, 0, dst, &err), &err);
    int bad = 0, left = (W - H) / 2;
    for (int c = 0; c < 3; c++)
      for (int y = 0; y < H; y++)
        for (int x = 0; x < H; x++) {
          size_t at = ((size_t)y * W + x + left) * ch + (ch == 1 ? 0 : c);
          bad += img[(c * H + y) * H + x] != px[at];
        }
    CHECK(bad == 0);
    pl_dataset_destroy(ds);
  }
}

/* A list label over int64 is refused naming the list, the line and the
 * text (strtoll saturated it to INT64_MAX); the largest int64 is kept. */
static void test_list_label_overflow(void) {
  char root[512], lst[600], png[600];
  snprintf(root, sizeof root, "%s", pl_test_path("ovf"));
  CHECK(mkdir(root, 0755) == 0);
  snprintf(png, sizeof png, "%s/a.png", root);
  write_png(png, 8, 8);
  snprintf(lst, sizeof lst, "%s/list.txt", root);
  pl_image_options o;
  pl_image_options_init(&o);
  o.size = 8;
  const char *bad[] = {"99999999999999999999", "9223372036854775808",
                       "-99999999999999999999"};
  for (int k = 0; k < 3; k++) {
    char text[200], want[200];
    snprintf(text, sizeof text, "a.png 3\na.png %s\n", bad[k]);
    CHECK(pl_test_write_file(lst, text, strlen(text)) == 0);
    pl_dataset *ds = NULL;
    pl_error err;
    CHECK_STATUS(pl_dataset_open_images(lst, &o, &ds, &err), PL_FORMAT, &err);
    snprintf(want, sizeof want,
             "list.txt:2: label '%s' does not fit in int64 (at most "
             "9223372036854775807)", bad[k]);
    CHECK_MSG(&err, want);
    CHECK(!strcmp(err.path, lst));
    CHECK(ds == NULL);
  }
  const char *ok = "a.png 9223372036854775807\n";
  CHECK(pl_test_write_file(lst, ok, strlen(ok)) == 0);
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_images(lst, &o, &ds, &err), &err);
  if (ds) {
    uint8_t img[3 * 8 * 8];
    int64_t label = 0;
    void *dst[2] = {img, &label};
    CHECK_OK(pl_dataset_read(ds, 0, dst, &err), &err);
    CHECK(label == INT64_MAX);
    pl_dataset_destroy(ds);
  }
}

/* A FIFO named like an image is refused at once (open waited for a writer
 * forever: ctest's timeout was the only way out). */
static void test_fifo_refused(void) {
  char root[512], cls[600], p[700];
  snprintf(root, sizeof root, "%s", pl_test_path("fifo"));
  snprintf(cls, sizeof cls, "%s/c0", root);
  CHECK(mkdir(root, 0755) == 0 && mkdir(cls, 0755) == 0);
  snprintf(p, sizeof p, "%s/a.png", cls);
  write_png(p, 8, 8);
  snprintf(p, sizeof p, "%s/x.jpg", cls);
  CHECK(mkfifo(p, 0644) == 0);
  pl_image_options o;
  pl_image_options_init(&o);
  o.size = 8;
  pl_dataset *ds = NULL;
  open_dir(root, PL_OK, NULL, &o, &ds);
  if (!ds)
    return;
  CHECK_EQ_U64(pl_dataset_length(ds), 2);
  uint8_t img[3 * 8 * 8];
  int64_t label;
  void *dst[2] = {img, &label};
  pl_error err;
  CHECK_STATUS(pl_dataset_read(ds, 1, dst, &err), PL_IO, &err);
  CHECK_MSG(&err, "x.jpg: not a regular file (a FIFO)");
  CHECK(!strcmp(err.path, p));
  pl_dataset_destroy(ds);
}

/* A FIFO given as the root (not a folder: taken as a list file) is refused
 * at once, naming it; its fopen waited for a writer forever (ctest's
 * timeout was the only way out). */
static void test_list_fifo_refused(void) {
  char p[600];
  snprintf(p, sizeof p, "%s", pl_test_path("list.fifo"));
  CHECK(mkfifo(p, 0644) == 0);
  pl_image_options o;
  pl_image_options_init(&o);
  o.size = 8;
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_STATUS(pl_dataset_open_images(p, &o, &ds, &err), PL_IO, &err);
  CHECK_MSG(&err, "list.fifo: not a folder or a list file (a FIFO)");
  CHECK(!strcmp(err.path, p));
  CHECK(ds == NULL);
  snprintf(p, sizeof p, "%s", pl_test_path("no-such-list.txt"));
  CHECK_STATUS(pl_dataset_open_images(p, &o, &ds, &err), PL_IO, &err);
  CHECK(!strcmp(err.path, p)); /* stat failed first: its message */
}

/* on_error=SKIP where no sample reads: the error is the sample's own (its
 * file in the message and in err.path), not that of the last replacement
 * tried; a NULL err (pl_dataset_read allows it) does not crash. */
static void test_skip_all_bad_names_own_file(void) {
  char root[512], cls[600], p[700];
  snprintf(root, sizeof root, "%s", pl_test_path("allbad"));
  snprintf(cls, sizeof cls, "%s/c0", root);
  CHECK(mkdir(root, 0755) == 0 && mkdir(cls, 0755) == 0);
  for (int i = 0; i < 3; i++) {
    snprintf(p, sizeof p, "%s/%02d.png", cls, i);
    CHECK(pl_test_write_file(p, "\x89PNG\r\n\x1a\n\0\0", 10) == 0);
  }
  pl_image_options o;
  pl_image_options_init(&o);
  o.size = 8;
  o.on_error = PL_IMAGE_ERROR_SKIP;
  pl_dataset *ds = NULL;
  open_dir(root, PL_OK, NULL, &o, &ds);
  if (!ds)
    return;
  uint8_t img[3 * 8 * 8];
  int64_t label;
  void *dst[2] = {img, &label};
  pl_error err;
  snprintf(p, sizeof p, "%s/01.png", cls);
  CHECK_STATUS(pl_dataset_read(ds, 1, dst, &err), PL_FORMAT, &err);
  char want[800];
  snprintf(want, sizeof want,
           "sample 1: no readable replacement after 16 tries: %s: PNG: the "
           "file is truncated", p);
  CHECK(!strcmp(err.message, want));
  CHECK(!strcmp(err.path, p));
  CHECK(pl_dataset_read(ds, 1, dst, NULL) == PL_FORMAT);
  pl_dataset_destroy(ds);
}

typedef struct warn_log {
  int n, wrong; /* replacements logged; those not naming the bad file */
} warn_log;

/* Workers may read on into the next epoch before the loader is destroyed:
 * the count is at least the epochs taken, each message the same. */
static void keep_warning(void *user, pl_log_level level, const char *msg) {
  warn_log *w = user;
  if (level != PL_LOG_WARN || !strstr(msg, "replaced"))
    return;
  w->n++;
  w->wrong += strstr(msg, "images: sample 5 replaced by sample ") != msg ||
              !strstr(msg, "05.png: PNG: the file is truncated");
}

/* on_error=SKIP: a replaced sample leaves no error behind (the loader
 * failed its batch with the bad file's status although the read returned
 * PL_OK), and the warning names the bad file's own error, not that of a
 * replacement attempt. */
static void test_skip_leaves_no_error(void) {
  char root[512], cls[600], p[700];
  snprintf(root, sizeof root, "%s", pl_test_path("skip"));
  snprintf(cls, sizeof cls, "%s/c0", root);
  CHECK(mkdir(root, 0755) == 0 && mkdir(cls, 0755) == 0);
  for (int i = 0; i < 12; i++) {
    snprintf(p, sizeof p, "%s/%02d.png", cls, i);
    write_png(p, 8, 8);
  }
  snprintf(p, sizeof p, "%s/05.png", cls);
  CHECK(pl_test_write_file(p, "\x89PNG\r\n\x1a\n\0\0", 10) == 0);
  pl_image_options o;
  pl_image_options_init(&o);
  o.size = 8;
  o.on_error = PL_IMAGE_ERROR_SKIP;
  pl_dataset *ds = NULL;
  open_dir(root, PL_OK, NULL, &o, &ds);
  if (!ds)
    return;
  uint8_t img[3 * 8 * 8];
  int64_t label;
  void *dst[2] = {img, &label};
  pl_error err;
  CHECK_OK(pl_dataset_read(ds, 5, dst, &err), &err);
  CHECK_EQ_U64(err.status, PL_OK);
  for (int workers = 0; workers <= 2; workers += 2) {
    warn_log w = {0};
    pl_loader_config cfg;
    pl_loader_config_init(&cfg);
    cfg.device = PL_DEVICE_CPU;
    cfg.batch_size = 4;
    cfg.num_workers = workers;
    cfg.log = keep_warning;
    cfg.log_user = &w;
    pl_loader *ld = NULL;
    CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
    if (!ld)
      continue;
    for (int epoch = 0; epoch < 2; epoch++) {
      pl_batch *b;
      pl_status st;
      int batches = 0;
      while ((st = pl_loader_next(ld, &b, &err)) == PL_OK) {
        batches++;
        pl_batch_release(b, NULL);
      }
      CHECK_STATUS(st, PL_END_OF_EPOCH, &err);
      CHECK_EQ_U64(batches, 3);
    }
    pl_loader_destroy(ld);
    CHECK(w.n >= 2);
    CHECK_EQ_U64(w.wrong, 0);
  }
  pl_dataset_destroy(ds);
}

/* flip_p and dct_scaling, the names of pl_image_options and of Python's
 * ImageFolder, are the spec's; flip and dct stay as deprecated spellings. */
static void spec_flip(const char *root, const char *opts, int want_flip) {
  char spec[900];
  snprintf(spec, sizeof spec, "images:%s?size=8&crop_field=1&%s", root, opts);
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_spec(spec, &ds, &err), &err);
  if (!ds)
    return;
  uint8_t img[3 * 8 * 8];
  int64_t label;
  int32_t crop[5] = {0};
  void *dst[3] = {img, &label, crop};
  for (uint64_t i = 0; i < pl_dataset_length(ds); i++) {
    CHECK_OK(pl_dataset_read(ds, i, dst, &err), &err);
    CHECK_EQ_U64(crop[4], want_flip);
  }
  pl_dataset_destroy(ds);
}

static void test_spec_spellings(void) {
  char root[512], cls[600], p[700];
  snprintf(root, sizeof root, "%s", pl_test_path("spell"));
  snprintf(cls, sizeof cls, "%s/c0", root);
  CHECK(mkdir(root, 0755) == 0 && mkdir(cls, 0755) == 0);
  for (int i = 0; i < 3; i++) {
    snprintf(p, sizeof p, "%s/%d.png", cls, i);
    write_png(p, 12, 10);
  }
  spec_flip(root, "flip_p=1&dct_scaling=0", 1);
  spec_flip(root, "flip_p=0&dct_scaling=1", 0);
  spec_flip(root, "flip=1&dct=0", 1); /* the deprecated spellings */
  spec_flip(root, "flip=0", 0);
  const char *both[][2] = {
      {"flip_p=1&flip=1", "images: options 'flip_p' and 'flip' (its deprecated spelling) both given"},
      {"dct=1&dct_scaling=0", "images: options 'dct_scaling' and 'dct' (its deprecated spelling) both given"},
      {"flip_p=2", "images option flip_p=2: want a number from 0 to 1"},
  };
  for (int k = 0; k < 3; k++) {
    char spec[900];
    snprintf(spec, sizeof spec, "images:%s?%s", root, both[k][0]);
    pl_dataset *ds = NULL;
    pl_error err;
    CHECK_STATUS(pl_dataset_open_spec(spec, &ds, &err), PL_INVALID_ARGUMENT, &err);
    CHECK_MSG(&err, both[k][1]);
  }
}

typedef struct own_log {
  int n, wrong;
} own_log;

/* "images: sample K replaced by sample J: .../0K.png: ...": K's own file. */
static void check_own_error(void *user, pl_log_level level, const char *msg) {
  own_log *w = user;
  unsigned k = 0, j = 0;
  char want[32];
  if (level != PL_LOG_WARN ||
      sscanf(msg, "images: sample %u replaced by sample %u", &k, &j) != 2)
    return;
  w->n++;
  snprintf(want, sizeof want, "/%02u.png: PNG: ", k);
  w->wrong += strstr(msg, want) == NULL;
}

/* Four bad files of six: a replacement attempt may pick another bad one,
 * whose error the warning named instead of the sample's own. */
static void test_skip_warns_with_own_error(void) {
  char root[512], cls[600], p[700];
  snprintf(root, sizeof root, "%s", pl_test_path("skip2"));
  snprintf(cls, sizeof cls, "%s/c0", root);
  CHECK(mkdir(root, 0755) == 0 && mkdir(cls, 0755) == 0);
  for (int i = 0; i < 6; i++) {
    snprintf(p, sizeof p, "%s/%02d.png", cls, i);
    if (i < 4)
      CHECK(pl_test_write_file(p, "\x89PNG\r\n\x1a\n\0\0", 10) == 0);
    else
      write_png(p, 8, 8);
  }
  pl_image_options o;
  pl_image_options_init(&o);
  o.size = 8;
  o.on_error = PL_IMAGE_ERROR_SKIP;
  pl_dataset *ds = NULL;
  open_dir(root, PL_OK, NULL, &o, &ds);
  if (!ds)
    return;
  own_log w = {0};
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  cfg.device = PL_DEVICE_CPU;
  cfg.batch_size = 6;
  cfg.log = check_own_error;
  cfg.log_user = &w;
  pl_loader *ld = NULL;
  pl_error err;
  CHECK_OK(pl_loader_create(ds, &cfg, &ld, &err), &err);
  pl_batch *b = NULL;
  if (ld)
    CHECK_OK(pl_loader_next(ld, &b, &err), &err);
  if (b) {
    const int64_t *labels = pl_batch_data(b, 1);
    CHECK_EQ_U64(pl_batch_size(b), 6);
    CHECK_EQ_U64(labels[0], 0);
    pl_batch_release(b, NULL);
  }
  pl_loader_destroy(ld);
  CHECK(w.n >= 4);
  CHECK_EQ_U64(w.wrong, 0);
  pl_dataset_destroy(ds);
}

int main(void) {
  test_exact_png_and_errors();
  test_list_label_overflow();
  test_fifo_refused();
  test_list_fifo_refused();
  test_skip_all_bad_names_own_file();
  test_skip_leaves_no_error();
  test_spec_spellings();
  test_skip_warns_with_own_error();
  test_png_gray_and_alpha();
  test_scratch_reuse();
#ifdef PL_FAULT_INJECTION
  test_alloc_faults();
#endif
  return pl_test_finish("test_sources_images");
}
#endif /* PL_HAVE_PNG */
