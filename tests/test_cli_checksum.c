/* `pinloader run --checksum` on Fashion-MNIST (train and t10k) and on a
 * generated CIFAR-10 file equals a checksum computed here independently:
 * the raw files are decompressed with zlib (not the library), and the
 * samples hashed in the order the CLI wrote to --order-out. */
#include "testutil.h"

#include <stdlib.h>
#include <zlib.h>

/* Debian's dataset-fashion-mnist, or PL_FASHION_DIR (a machine without the
 * package, such as the GPU box, gets a copy carried along). */
static const char *fashion_dir(void) {
  const char *d = getenv("PL_FASHION_DIR");
  return d ? d : "/usr/share/datasets/fashion-mnist";
}

typedef struct blob {
  uint8_t *p;
  size_t n;
} blob;

static blob gunzip_all(const char *path) {
  blob b = {0};
  gzFile g = gzopen(path, "rb");
  if (!g)
    return b;
  size_t cap = 1 << 20;
  b.p = malloc(cap);
  int r;
  while (b.p && (r = gzread(g, b.p + b.n, (unsigned)(cap - b.n))) > 0) {
    b.n += (size_t)r;
    if (b.n == cap)
      b.p = realloc(b.p, cap *= 2);
  }
  gzclose(g);
  return b;
}

/* Runs the CLI; returns its checksum line's value and fills order[]. */
static int run_cli(const char *args, uint64_t *sum, uint64_t *order,
                   size_t max, size_t *count) {
  const char *cli = getenv("PL_CLI");
  const char *ord = pl_test_path("order.txt");
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s run %s --checksum --quiet --order-out %s",
           cli, args, ord);
  FILE *p = popen(cmd, "r");
  if (!p)
    return -1;
  char line[512];
  int found = 0;
  while (fgets(line, sizeof line, p))
    if (sscanf(line, "checksum: %16llx", (unsigned long long *)sum) == 1)
      found = 1;
  if (pclose(p) != 0 || !found)
    return -1;
  FILE *f = fopen(ord, "r");
  unsigned long long v;
  *count = 0;
  while (f && *count < max && fscanf(f, "%llu", &v) == 1)
    order[(*count)++] = v;
  if (f)
    fclose(f);
  return 0;
}

/* FNV-1a over each delivered sample's fields in declared order. */
static uint64_t reference(const uint64_t *order, size_t count,
                          const uint8_t *const *field, const size_t *bytes,
                          int nfields) {
  uint64_t h = PL_FNV_OFFSET;
  for (size_t k = 0; k < count; k++)
    for (int f = 0; f < nfields; f++)
      h = pl_test_fnv1a(h, field[f] + order[k] * bytes[f], bytes[f]);
  return h;
}

static void fashion(const char *split, uint64_t n, const char *flags) {
  char img[256], lbl[256], args[1024];
  snprintf(img, sizeof img, "%s/%s-images-idx3-ubyte.gz", fashion_dir(), split);
  snprintf(lbl, sizeof lbl, "%s/%s-labels-idx1-ubyte.gz", fashion_dir(), split);
  blob a = gunzip_all(img), b = gunzip_all(lbl);
  CHECK(a.n == 16 + n * 784 && b.n == 8 + n);
  uint64_t *order = malloc(2 * n * sizeof *order), sum = 0;
  size_t count = 0;
  snprintf(args, sizeof args, "--dataset idx:%s,%s %s", img, lbl, flags);
  CHECK(run_cli(args, &sum, order, 2 * n, &count) == 0);
  const uint8_t *fields[2] = {a.p + 16, b.p + 8};
  size_t bytes[2] = {784, 1};
  CHECK(count > 0);
  CHECK_EQ_U64(sum, reference(order, count, fields, bytes, 2));
  printf("fashion %s %s: %zu samples, checksum %016llx\n", split, flags,
         count, (unsigned long long)sum);
  free(order);
  free(a.p);
  free(b.p);
}

static void cifar(void) {
  enum { N = 1500 };
  const char *path = pl_test_path("data_batch_1.bin");
  CHECK(pl_test_write_cifar(path, 0, N) == 0);
  uint8_t *raw = malloc((size_t)N * 3073), *img = malloc((size_t)N * 3072),
          *lab = malloc(N);
  FILE *f = fopen(path, "rb");
  CHECK(f && fread(raw, 3073, N, f) == N);
  if (f)
    fclose(f);
  for (size_t i = 0; i < N; i++) { /* the label comes first on disk */
    lab[i] = raw[i * 3073];
    memcpy(img + i * 3072, raw + i * 3073 + 1, 3072);
  }
  uint64_t order[N], sum = 0;
  size_t count = 0;
  char args[1024];
  snprintf(args, sizeof args,
           "--dataset cifar10:%s --batch-size 100 --workers 3 --shuffle "
           "--seed 5 --drop-last",
           path);
  CHECK(run_cli(args, &sum, order, N, &count) == 0);
  CHECK_EQ_U64(count, N);
  const uint8_t *fields[2] = {img, lab};
  size_t bytes[2] = {3072, 1};
  CHECK_EQ_U64(sum, reference(order, count, fields, bytes, 2));
  free(raw);
  free(img);
  free(lab);
}

int main(void) {
  if (!getenv("PL_CLI"))
    return 77;
  char probe_path[512];
  snprintf(probe_path, sizeof probe_path, "%s/t10k-labels-idx1-ubyte.gz",
           fashion_dir());
  FILE *probe = fopen(probe_path, "rb");
  if (probe) {
    fclose(probe);
    fashion("t10k", 10000, "--batch-size 128 --workers 2 --shuffle --seed 1");
    fashion("train", 60000, "--batch-size 256 --workers 2 --shuffle --seed 9 "
                            "--epochs 2");
    fashion("t10k", 10000, "--batch-size 1000 --workers 0");
  } else {
    printf("Fashion-MNIST not installed (scripts/setup.sh installs it)\n");
    pl_test_failures++;
  }
  cifar();
  return pl_test_finish("test_cli_checksum");
}
