/* Tar member indexes from hand-built archives: ustar prefixes, GNU long
 * names and base-256 sizes, pax path and size records, skipped members,
 * WebDataset grouping, the cache's round trip, and each refusal's exact
 * message. Then the shards source over such a file through the C API. */
#include "data/dataset.h"
#include "data/tar_index.h"
#include "testutil.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct tarbuf {
  uint8_t b[1 << 16];
  size_t n;
} tarbuf;

static void checksum(uint8_t *h) {
  memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (int i = 0; i < 512; i++)
    sum += h[i];
  snprintf((char *)h + 148, 8, "%06o", sum);
}

/* A header of `type` for a body of n bytes (size written in octal, or
 * base-256 when base256), the body, and its padding. */
static void add(tarbuf *t, const char *name, const char *prefix, char type,
                const void *body, size_t n, bool base256) {
  uint8_t *h = t->b + t->n;
  memset(h, 0, 512);
  snprintf((char *)h, 100, "%s", name);
  snprintf((char *)h + 100, 8, "%07o", 0644);
  if (base256) {
    h[124] = 0x80;
    for (int i = 0; i < 8; i++)
      h[135 - i] = (uint8_t)(n >> (8 * i));
  } else {
    snprintf((char *)h + 124, 12, "%011o", (unsigned)n);
  }
  h[156] = (uint8_t)type;
  memcpy(h + 257, "ustar\0" "00", 8);
  if (prefix)
    snprintf((char *)h + 345, 155, "%s", prefix);
  checksum(h);
  memcpy(h + 512, body, n);
  t->n += 512 + (n + 511) / 512 * 512;
  memset(t->b + t->n - ((512 - n % 512) % 512), 0, (512 - n % 512) % 512);
}

static void file(tarbuf *t, const char *name, const char *body) {
  add(t, name, NULL, '0', body, strlen(body), false);
}

static void build(tarbuf *t) {
  memset(t, 0, sizeof *t);
  file(t, "a/0001.jpg", "J1");
  file(t, "a/0001.cls", "7");
  add(t, "0001.seg.png", "a", '0', "P1", 2, false); /* ustar prefix: a/ */
  add(t, "dir/", NULL, '5', "", 0, false);         /* a folder: skipped */
  file(t, "README", "no extension: skipped");
  char longname[300];
  memset(longname, 'k', 200);
  strcpy(longname + 200, ".cls");
  add(t, "././@LongLink", NULL, 'L', longname, strlen(longname) + 1, false);
  file(t, "truncated-name-ignored.cls", "12");
  const char *pax = "28 path=b/0002.txt.anything\n" "10 size=3\n";
  add(t, "PaxHeader", NULL, 'x', pax, strlen(pax), false);
  add(t, "b/0002.txt", NULL, '0', "pax", 3, false);
  add(t, "g", NULL, 'g', "", 0, false);
  add(t, "b/0002.cls", NULL, '0', "42", 2, true); /* base-256 size */
  t->n += 1024;                                     /* the end: zero blocks */
}

static void test_members(void) {
  tarbuf t;
  build(&t);
  pl_tar_index ix;
  pl_error err;
  CHECK_OK(pl_tar_index_build(t.b, t.n, "t.tar", &ix, &err), &err);
  CHECK_EQ_U64(ix.nmembers, 6);
  CHECK_EQ_U64(ix.nsamples, 3);
  const char *keys[] = {"a/0001", "a/0001", "a/0001", NULL, "b/0002", "b/0002"};
  const char *exts[] = {"jpg", "cls", "seg.png", "cls", "txt.anything", "cls"};
  const char *body[] = {"J1", "7", "P1", "12", "pax", "42"};
  for (uint64_t m = 0; m < ix.nmembers; m++) {
    if (keys[m])
      CHECK(!strcmp(pl_tar_key(&ix, m), keys[m]));
    CHECK(!strcmp(pl_tar_ext(&ix, m), exts[m]));
    CHECK_EQ_U64(ix.members[m].size, strlen(body[m]));
    CHECK(!memcmp(t.b + ix.members[m].offset, body[m], strlen(body[m])));
  }
  CHECK_EQ_U64(strlen(pl_tar_key(&ix, 3)), 200); /* the GNU long name */
  uint64_t first[] = {0, 3, 4, 6};
  for (int i = 0; i <= 3 && i <= (int)ix.nsamples; i++)
    CHECK_EQ_U64(ix.first[i], first[i]);

  uint8_t *buf;
  uint64_t len;
  pl_tar_index back;
  CHECK_OK(pl_tar_index_save(&ix, "tag 1", &buf, &len, &err), &err);
  CHECK_OK(pl_tar_index_load(buf, len, "tag 1", &back, &err), &err);
  CHECK_EQ_U64(back.nmembers, ix.nmembers);
  CHECK(!memcmp(back.members, ix.members, ix.nmembers * sizeof *ix.members));
  CHECK(!memcmp(back.names, ix.names, ix.names_len));
  pl_tar_index_free(&back);
  CHECK_STATUS(pl_tar_index_load(buf, len, "tag 2", &back, &err), PL_FORMAT,
               &err);
  CHECK_MSG(&err, "tar index cache: stale or foreign");
  buf[len - 1] = 'x'; /* names no longer end in NUL */
  CHECK_STATUS(pl_tar_index_load(buf, len, "tag 1", &back, &err), PL_FORMAT,
               &err);
  CHECK_MSG(&err, "tar index cache: damaged");
  CHECK_STATUS(pl_tar_index_load(buf, len - 9, "tag 1", &back, &err),
               PL_FORMAT, &err);
  free(buf);
  pl_tar_index_free(&ix);
}

static void test_refusals(void) {
  tarbuf t;
  build(&t);
  pl_tar_index ix;
  pl_error err;
  t.b[1024 + 3] ^= 1; /* the second header's checksum no longer matches */
  CHECK_STATUS(pl_tar_index_build(t.b, t.n, "t.tar", &ix, &err), PL_FORMAT,
               &err);
  CHECK_MSG(&err, "t.tar: not a tar file: bad header checksum at offset 1024");
  build(&t);
  CHECK_STATUS(pl_tar_index_build(t.b, 1024 + 100, "t.tar", &ix, &err),
               PL_FORMAT, &err);
  CHECK_MSG(&err, "t.tar: not a tar file: a header cut short at offset 1024");
  CHECK_STATUS(pl_tar_index_build(t.b, 513, "t.tar", &ix, &err), PL_FORMAT,
               &err);
  CHECK_MSG(&err, "t.tar: member at offset 0 runs past the end (2 bytes, 1 "
                  "left): a truncated shard?");
  /* no samples at all, and no bytes: an empty index */
  CHECK_OK(pl_tar_index_build(t.b, 0, "t.tar", &ix, &err), &err);
  CHECK_EQ_U64(ix.nsamples, 0);
  pl_tar_index_free(&ix);
}

static void test_source(void) {
  tarbuf t;
  build(&t);
  const char *path = pl_test_path("s.tar");
  CHECK(pl_test_write_file(path, t.b, t.n) == 0);
  pl_shards_options o;
  pl_shards_options_init(&o);
  o.fields = "label:cls,text:txt.anything;jpg:bytes";
  o.max_bytes = 8;
  o.cache_dir = pl_test_path("cache");
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_shards(&path, 1, &o, &ds, &err), &err);
  CHECK_EQ_U64(pl_dataset_length(ds), 3);
  CHECK_EQ_U64(pl_dataset_num_fields(ds), 3);
  CHECK(!strcmp(pl_dataset_field(ds, 2)->name, "text_len"));
  int64_t label = 0, n = 0;
  uint8_t text[8];
  void *dst[3] = {&label, text, &n};
  CHECK_OK(pl_dataset_read(ds, 0, dst, &err), &err);
  CHECK(label == 7 && n == 2 && !memcmp(text, "J1\0\0\0\0\0\0", 8));
  CHECK_OK(pl_dataset_read(ds, 2, dst, &err), &err);
  CHECK(label == 42 && n == 3 && !memcmp(text, "pax", 3));
  CHECK_STATUS(pl_dataset_read(ds, 1, dst, &err), PL_FORMAT, &err);
  CHECK_MSG(&err, "has no member for field 'text' (want extension "
                  "txt.anything;jpg; it has cls)");
  pl_dataset_destroy(ds);
  /* through the spec, the cached index */
  char spec[4200];
  snprintf(spec, sizeof spec, "shards:%s?fields=label:cls&size=8", path);
  CHECK_OK(pl_dataset_open_spec(spec, &ds, &err), &err);
  CHECK_EQ_U64(pl_dataset_length(ds), 3);
  pl_dataset_destroy(ds);
  snprintf(spec, sizeof spec, "shards:%s?fields=label:cls&colour=1", path);
  CHECK_STATUS(pl_dataset_open_spec(spec, &ds, &err), PL_INVALID_ARGUMENT,
               &err);
}

/* A fetcher of one's own: "mem://PATH" read from the file; counts its
 * calls and its frees. */
typedef struct fetch_state {
  atomic_int calls;
  int frees;
  bool fail;
} fetch_state;

static int file_fetch(void *user, const char *url, uint64_t off, uint64_t len,
                      pl_shards_sink sink, void *sink_user, char *msg,
                      size_t cap) {
  fetch_state *f = user;
  atomic_fetch_add(&f->calls, 1);
  if (f->fail) {
    snprintf(msg, cap, "bucket gone");
    return 1;
  }
  FILE *fp = fopen(url + strlen("mem://"), "rb");
  if (!fp)
    return 1;
  uint8_t *buf = malloc(1 << 16); /* called from several threads at once */
  fseek(fp, (long)off, SEEK_SET);
  size_t n = buf ? fread(buf, 1, len ? (size_t)len : (1 << 16), fp) : 0;
  fclose(fp);
  int rc = buf ? sink(sink_user, buf, n) : 1;
  free(buf);
  return rc;
}

static void count_free(void *user) { ((fetch_state *)user)->frees++; }

static void test_fetcher(void) {
  tarbuf t;
  build(&t);
  const char *path = pl_test_path("f.tar");
  CHECK(pl_test_write_file(path, t.b, t.n) == 0);
  char url[4200], opts[4200];
  snprintf(url, sizeof url, "mem://%s", path);
  snprintf(opts, sizeof opts, "fields=label:cls&readahead=ranges&cache=%s",
           pl_test_path("fcache"));
  const char *urls[1] = {url};
  fetch_state f = {0};
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_shards_fetch(urls, 1, opts, file_fetch, &f,
                                        count_free, &ds, &err), &err);
  CHECK(f.calls == 1); /* the whole shard, for its index */
  int64_t label = 0;
  void *dst[1] = {&label};
  CHECK_OK(pl_dataset_read(ds, 2, dst, &err), &err);
  CHECK(label == 42 && f.calls == 2); /* one range */
  pl_dataset_destroy(ds);
  CHECK(f.frees == 1);
  /* Failures: the fetcher's message; the fetcher freed also then. */
  f = (fetch_state){.fail = true};
  CHECK_STATUS(pl_dataset_open_shards_fetch(urls, 1, opts, file_fetch, &f,
                                            count_free, &ds, &err),
               PL_IO, &err);
  CHECK_MSG(&err, "/f.tar: the fetcher failed: bucket gone");
  CHECK(f.frees == 1);
  f = (fetch_state){0};
  CHECK_STATUS(pl_dataset_open_shards_fetch(urls, 1, "colour=1", file_fetch,
                                            &f, count_free, &ds, &err),
               PL_INVALID_ARGUMENT, &err);
  CHECK(f.frees == 1 && f.calls == 0);
}

/* Four shards over a fetcher, read whole with read-ahead and a cache of
 * one byte (every shard evicted once idle) by three workers, two shuffled
 * epochs: each sample once an epoch. A thread-sanitizer run checks the
 * read-ahead thread against the readers. */
static void test_read_ahead_loader(void) {
  tarbuf t;
  build(&t);
  char urls[4][4200];
  const char *u[4];
  for (int i = 0; i < 4; i++) {
    char name[16];
    snprintf(name, sizeof name, "r%d.tar", i);
    const char *path = pl_test_path(name);
    CHECK(pl_test_write_file(path, t.b, t.n) == 0);
    snprintf(urls[i], sizeof urls[i], "mem://%s", path);
    u[i] = urls[i];
  }
  char opts[4200];
  snprintf(opts, sizeof opts,
           "fields=label:cls&cache_bytes=1&shuffle_buffer=2&prefetch=2&"
           "cache=%s", pl_test_path("rcache"));
  fetch_state f = {0};
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_shards_fetch(u, 4, opts, file_fetch, &f,
                                        count_free, &ds, &err), &err);
  if (!ds)
    return;
  CHECK_EQ_U64(pl_dataset_length(ds), 12);
  pl_loader_config c;
  pl_loader_config_init(&c);
  c.batch_size = 2, c.num_workers = 3, c.seed = 5, c.shuffle = 1;
  c.device = PL_DEVICE_CPU;
  pl_loader *ld = NULL;
  CHECK_OK(pl_loader_create(ds, &c, &ld, &err), &err);
  for (int epoch = 0; ld && epoch < 2; epoch++) {
    int seen[12] = {0};
    pl_batch *b;
    pl_status st;
    while ((st = pl_loader_next(ld, &b, &err)) == PL_OK) {
      const int64_t *labels = pl_batch_data(b, 0);
      for (uint32_t j = 0; j < pl_batch_size(b); j++) {
        uint64_t idx = pl_batch_sample_index(b, j);
        static const int64_t want[3] = {7, 12, 42};
        CHECK(idx < 12 && labels[j] == want[idx % 3]);
        seen[idx % 12]++;
      }
      pl_batch_release(b, NULL);
    }
    CHECK_STATUS(st, PL_END_OF_EPOCH, &err);
    for (int i = 0; i < 12; i++)
      CHECK(seen[i] == 1);
  }
  pl_loader_destroy(ld);
  pl_dataset_destroy(ds);
  CHECK(f.frees == 1);
}

int main(void) {
  test_members();
  test_refusals();
  test_source();
  test_fetcher();
  test_read_ahead_loader();
  return pl_test_finish("test_tar_index");
}
