/* Probe: CPU time per image of the images source on one thread (decode +
 * RandomResizedCrop(224) + flip into uint8 [3,224,224]), for comparing two
 * builds on a loaded machine: the thread's CPU clock, not wall time, the
 * minimum over runs; also a hash of every output, to check that two
 * builds give the same bytes. Not part of the library. Against a build
 * tree (its copies of the codec archives):
 *   cc -O2 -Iinclude bench/image_probe.c build/libpinloader.a \
 *      build/codecs/libjpeg.a build/codecs/libpng16.a -lz -lm -lpthread \
 *      -o image_probe
 * Usage: image_probe ROOT [runs] [size] */
#include <pinloader.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s ROOT [runs] [size]\n", argv[0]);
    return 2;
  }
  int runs = argc > 2 ? atoi(argv[2]) : 1;
  pl_image_options o;
  pl_image_options_init(&o);
  if (argc > 3)
    o.size = (uint32_t)atoi(argv[3]);
  pl_dataset *ds;
  pl_error err;
  if (pl_dataset_open_images(argv[1], &o, &ds, &err) != PL_OK) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  uint64_t n = pl_dataset_length(ds);
  uint8_t *img = malloc((size_t)3 * o.size * o.size);
  int64_t label;
  void *dst[2] = {img, &label};
  uint64_t hash = 1469598103934665603ull; /* FNV-1a of every output */
  double best = 1e30;
  for (int r = 0; r < runs; r++) {
    double t0 = cpu_now();
    for (uint64_t i = 0; i < n; i++) {
      if (pl_dataset_read(ds, i, dst, &err) != PL_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
      }
      if (r == 0)
        for (size_t b = 0; b < (size_t)3 * o.size * o.size; b++)
          hash = (hash ^ img[b]) * 1099511628211ull;
    }
    double t = cpu_now() - t0;
    best = t < best ? t : best;
  }
  printf("%.4f ms/image (min of %d over %llu images; output hash %016llx)\n",
         1e3 * best / (double)n, runs, (unsigned long long)n,
         (unsigned long long)hash);
  free(img);
  pl_dataset_destroy(ds);
  return 0;
}
