/* The copy planner (src/backend/copy_plan.c) on its own: given a backend's
 * capabilities, a dataset's fields and the loader's request, the exact
 * plan: mode, routes, batch and staging offsets, staging size and count,
 * pinned budget, span capacity, regions, and why direct mode is off. The
 * CUDA capabilities are declared here by hand, so every route the GPU
 * takes is checked on a machine without one. */
#include "loader_fixture.h"

#include "backend/backend.h"
#include "backend/copy_plan.h"
#include "backend/host_pages.h"

static const pl_backend_caps CUDA_CAPS = {1, 1, 1, 4u << 20};

static pl_plan_request request(pl_dataset *ds, uint32_t bs, int workers,
                               int prefetch) {
  return (pl_plan_request){.ds = ds, .batch_size = bs,
                           .num_workers = workers, .prefetch = prefetch,
                           .pin_memory = 1};
}

static void make(const pl_backend_caps *caps, const pl_plan_request *req,
                 pl_copy_plan *p) {
  pl_error err;
  CHECK_OK(pl_copy_plan_make(caps, req, p, &err), &err);
}

static void check_field(const pl_copy_plan *p, int f, uint64_t bytes,
                        uint64_t batch_off, uint64_t stage_off,
                        pl_route route) {
  CHECK_EQ_U64(p->fields[f].bytes, bytes);
  CHECK_EQ_U64(p->fields[f].batch_off, batch_off);
  CHECK_EQ_U64(p->fields[f].stage_off, stage_off);
  CHECK(p->fields[f].route == route);
}

/* CIFAR-sized samples (3072 + 8 bytes), batch 1024, 14 workers: whole
 * batches, staging laid out as the batch, prefetch-deep staging. */
static void test_whole(pl_dataset *ds) {
  pl_plan_request req = request(ds, 1024, 14, 28);
  pl_copy_plan p;
  make(&CUDA_CAPS, &req, &p);
  CHECK(p.mode == PL_PLAN_WHOLE);
  CHECK_EQ_U64(p.nfields, 2);
  check_field(&p, 0, 3072, 0, 0, PL_ROUTE_GATHER);
  check_field(&p, 1, 8, 3145728, 3145728, PL_ROUTE_GATHER);
  CHECK_EQ_U64(p.batch_bytes, 3145728 + 8192);
  CHECK_EQ_U64(p.stage_bytes, p.batch_bytes);
  CHECK_EQ_U64(p.chunk_samples, 1024);
  CHECK_EQ_U64(p.staging_buffers, 16); /* min(prefetch, workers) + 2 */
  CHECK_EQ_U64(p.max_spans, 1);
  CHECK_EQ_U64(p.pinned_budget, 16 * pl_pages_size(p.batch_bytes));
  CHECK_EQ_U64(p.nregions, 0);
  CHECK(p.why_not_direct[0] == '\0');
  pl_copy_plan_free(&p);
  /* A budget given is the budget. */
  req.pinned_budget = 12345;
  make(&CUDA_CAPS, &req, &p);
  CHECK_EQ_U64(p.pinned_budget, 12345);
  pl_copy_plan_free(&p);
}

/* Batch 4096 (12.6 MB, more than twice 4 MiB): chunks of 1361 samples
 * (4 MiB / 3080 bytes), 64-byte aligned in the chunk, two per worker. */
static void test_chunked(pl_dataset *ds) {
  pl_plan_request req = request(ds, 4096, 14, 28);
  pl_copy_plan p;
  make(&CUDA_CAPS, &req, &p);
  CHECK(p.mode == PL_PLAN_CHUNKED);
  CHECK_EQ_U64(p.batch_bytes, 12582912 + 32768);
  CHECK_EQ_U64(p.chunk_samples, 1361);
  check_field(&p, 0, 3072, 0, 0, PL_ROUTE_CHUNK);
  check_field(&p, 1, 8, 12582912, 4180992, PL_ROUTE_CHUNK);
  CHECK_EQ_U64(p.stage_bytes, 4180992 + 1361 * 8);
  CHECK_EQ_U64(p.staging_buffers, 30);
  CHECK_EQ_U64(p.max_spans, 2);
  CHECK_EQ_U64(p.pinned_budget, 30 * pl_pages_size(p.stage_bytes));
  pl_copy_plan_free(&p);

  /* Never chunked when told so, whatever the size. */
  req.copy_chunk_bytes = UINT64_MAX;
  make(&CUDA_CAPS, &req, &p);
  CHECK(p.mode == PL_PLAN_WHOLE);
  CHECK_EQ_U64(p.stage_bytes, p.batch_bytes);
  CHECK_EQ_U64(p.staging_buffers, 16);
  pl_copy_plan_free(&p);

  /* Exactly twice the chunk is still whole: 2 * 4 MiB batches. */
  pl_dataset *one = NULL;
  fixture fx = {0};
  one = fixture_dataset(&fx, 100, 4088); /* 4096 bytes a sample */
  req = request(one, 2048, 1, 2);
  make(&CUDA_CAPS, &req, &p);
  CHECK_EQ_U64(p.batch_bytes, 8u << 20);
  CHECK(p.mode == PL_PLAN_WHOLE);
  CHECK_EQ_U64(p.staging_buffers, 3);
  pl_copy_plan_free(&p);
  req.batch_size = 2049; /* one sample more: chunked */
  make(&CUDA_CAPS, &req, &p);
  CHECK_EQ_U64(p.batch_bytes, 8376320 + 2049 * 8);
  CHECK(p.mode == PL_PLAN_CHUNKED);
  CHECK_EQ_U64(p.chunk_samples, 1024);
  CHECK_EQ_U64(p.staging_buffers, 4);
  pl_copy_plan_free(&p);
  pl_dataset_destroy(one);
}

/* A chunk size of the caller's: 1093-byte samples, 3000-byte chunks hold
 * two; the label array follows at the next 64 bytes. */
static void test_small_chunks(void) {
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 100, 1085);
  pl_plan_request req = request(ds, 16, 3, 0);
  req.prefetch = 6;
  req.copy_chunk_bytes = 3000;
  pl_copy_plan p;
  make(&CUDA_CAPS, &req, &p);
  CHECK(p.mode == PL_PLAN_CHUNKED);
  CHECK_EQ_U64(p.batch_bytes, 17408 + 128);
  check_field(&p, 1, 8, 17408, 2176, PL_ROUTE_CHUNK);
  CHECK_EQ_U64(p.chunk_samples, 2);
  CHECK_EQ_U64(p.stage_bytes, 2176 + 16);
  CHECK_EQ_U64(p.staging_buffers, 8);
  pl_copy_plan_free(&p);
  pl_dataset_destroy(ds);
}

/* The CPU stages nothing: whole batches written in place, no staging, no
 * chunks even when asked, no direct mode. */
static void test_cpu(pl_dataset *ds) {
  pl_backend_caps caps = pl_backend_cpu_caps();
  pl_plan_request req = request(ds, 4096, 14, 28);
  req.copy_chunk_bytes = 4096;
  req.direct_copy = 1;
  pl_copy_plan p;
  make(&caps, &req, &p);
  CHECK(p.mode == PL_PLAN_WHOLE);
  check_field(&p, 1, 8, 12582912, 12582912, PL_ROUTE_GATHER);
  CHECK_EQ_U64(p.stage_bytes, 0);
  CHECK_EQ_U64(p.staging_buffers, 0);
  CHECK_EQ_U64(p.max_spans, 1);
  CHECK(strstr(p.why_not_direct, "they need a CUDA device") != NULL);
  pl_copy_plan_free(&p);
}

static void check_refused(pl_plan_request req, const char *why) {
  pl_copy_plan p, gather;
  req.direct_copy = 1;
  make(&CUDA_CAPS, &req, &p);
  req.direct_copy = 0;
  make(&CUDA_CAPS, &req, &gather);
  CHECK(p.mode == gather.mode);
  CHECK_EQ_U64(p.stage_bytes, gather.stage_bytes);
  CHECK_EQ_U64(p.staging_buffers, gather.staging_buffers);
  CHECK_EQ_U64(p.pinned_budget, gather.pinned_budget);
  CHECK_EQ_U64(p.nregions, 0);
  CHECK(p.regions == NULL);
  CHECK_EQ_U64(p.max_spans, gather.max_spans);
  CHECK_EQ_U64(p.chunk_samples, gather.chunk_samples);
  CHECK_EQ_U64(p.batch_bytes, gather.batch_bytes);
  CHECK_EQ_U64(p.nfields, gather.nfields);
  for (int f = 0; f < p.nfields && f < gather.nfields; f++) /* untouched */
    check_field(&p, f, gather.fields[f].bytes, gather.fields[f].batch_off,
                gather.fields[f].stage_off, gather.fields[f].route);
  if (!strstr(p.why_not_direct, why))
    fprintf(stderr, "why '%s', wanted '%s'\n", p.why_not_direct, why);
  CHECK(strstr(p.why_not_direct, why) != NULL);
  CHECK(gather.why_not_direct[0] == '\0');
  pl_copy_plan_free(&p);
  pl_copy_plan_free(&gather);
}

static pl_dataset *open_idx(uint32_t rows, uint32_t cols) {
  const char *img = pl_test_path("img"), *lbl = pl_test_path("lbl");
  if (pl_test_write_idx(img, lbl, 100, rows, cols, 0) != 0)
    exit(2);
  pl_dataset *ds = NULL;
  pl_error err;
  CHECK_OK(pl_dataset_open_idx(img, lbl, &ds, &err), &err);
  return ds;
}

/* 64 KiB images: DIRECT, the labels gathered into a 64-byte staging
 * buffer; one span per image at worst plus one for the labels; the image
 * file's mapping to page-lock; the default budget holds it and staging. */
static void test_direct(void) {
  pl_dataset *ds = open_idx(64, 1024);
  pl_plan_request req = request(ds, 64, 2, 4);
  req.direct_copy = 1;
  pl_copy_plan p;
  make(&CUDA_CAPS, &req, &p);
  CHECK(p.mode == PL_PLAN_DIRECT);
  CHECK(p.why_not_direct[0] == '\0');
  check_field(&p, 0, 65536, 0, 0, PL_ROUTE_DIRECT);
  check_field(&p, 1, 1, 4194304, 0, PL_ROUTE_GATHER);
  CHECK_EQ_U64(p.batch_bytes, 4194304 + 64);
  CHECK_EQ_U64(p.stage_bytes, 64);
  CHECK_EQ_U64(p.staging_buffers, 4); /* the gather plan's count */
  CHECK_EQ_U64(p.max_spans, 65);
  pl_region r[4];
  CHECK_EQ_U64(ds->vt->regions(ds, 0, r, 4), 1);
  CHECK_EQ_U64(p.nregions, 1);
  CHECK(p.regions[0].ptr == r[0].ptr);
  CHECK_EQ_U64(p.region_bytes, r[0].len);
  CHECK(r[0].len >= 100 * 65536);
  CHECK_EQ_U64(p.pinned_budget, r[0].len + 4 * pl_pages_size(64));
  pl_copy_plan_free(&p);

  /* A budget that holds exactly that is enough; a byte less is not. */
  req.pinned_budget = r[0].len + 4 * pl_pages_size(64);
  make(&CUDA_CAPS, &req, &p);
  CHECK(p.mode == PL_PLAN_DIRECT);
  CHECK_EQ_U64(p.pinned_budget, req.pinned_budget);
  pl_copy_plan_free(&p);
  req.pinned_budget--;
  check_refused(req, "cannot hold the dataset's");
  req.pinned_budget = 4u << 20;
  check_refused(req, "the pinned budget of 4194304 bytes cannot hold");
  req.pinned_budget = 0;
  req.pin_memory = 0;
  check_refused(req, "pin_memory is off");
  pl_dataset_destroy(ds);

  ds = open_idx(28, 28);
  check_refused(request(ds, 64, 2, 4), "no field has samples of 64 KiB");
  pl_dataset_destroy(ds);
}

static void test_direct_refused(pl_dataset *fixture_ds) {
  check_refused(request(fixture_ds, 1024, 14, 28),
                "this source cannot say where its bytes live");
  /* Not asked for: nothing to say. */
  pl_copy_plan p;
  pl_plan_request req = request(fixture_ds, 1024, 14, 28);
  make(&CUDA_CAPS, &req, &p);
  CHECK(p.why_not_direct[0] == '\0');
  pl_copy_plan_free(&p);
}

#ifdef PL_FAULT_INJECTION
#include "core/fault.h"
/* Each of the planner's allocations, failed in turn: a clean PL_NO_MEMORY
 * and nothing held (ASan checks the rest). */
static void test_alloc_faults(void) {
  pl_dataset *ds = open_idx(64, 1024);
  pl_plan_request req = request(ds, 64, 2, 4);
  req.direct_copy = 1;
  int k;
  for (k = 0; k < 8; k++) {
    pl_copy_plan p;
    pl_error err;
    pl_fault_arm(PL_FAULT_ALLOC, k, 1);
    pl_status s = pl_copy_plan_make(&CUDA_CAPS, &req, &p, &err);
    pl_fault_reset();
    if (s == PL_OK) {
      CHECK(p.mode == PL_PLAN_DIRECT);
      pl_copy_plan_free(&p);
      break;
    }
    CHECK_STATUS(s, PL_NO_MEMORY, &err);
    CHECK_MSG(&err, "out of memory for the copy plan");
    CHECK(p.fields == NULL && p.regions == NULL);
  }
  CHECK_EQ_U64(k, 2); /* the fields, the regions */
  pl_dataset_destroy(ds);
}
#endif

/* The transforms' draws (extra_sample_bytes, 16 a sample) are one more
 * field, after the dataset's: gathered with the batch (whole), chunked
 * with it, and gathered beside the small fields in direct mode. */
static void test_extra_field(pl_dataset *ds) {
  pl_plan_request req = request(ds, 1024, 14, 28);
  req.extra_sample_bytes = 16;
  pl_copy_plan p;
  make(&CUDA_CAPS, &req, &p);
  CHECK(p.mode == PL_PLAN_WHOLE);
  CHECK_EQ_U64(p.nfields, 3);
  check_field(&p, 1, 8, 3145728, 3145728, PL_ROUTE_GATHER);
  check_field(&p, 2, 16, 3145728 + 8192, 3145728 + 8192, PL_ROUTE_GATHER);
  CHECK_EQ_U64(p.batch_bytes, 3145728 + 8192 + 16384);
  pl_copy_plan_free(&p);
  req.batch_size = 4096; /* chunks of 4 MiB / 3096 bytes = 1354 samples */
  make(&CUDA_CAPS, &req, &p);
  CHECK(p.mode == PL_PLAN_CHUNKED);
  CHECK_EQ_U64(p.chunk_samples, 1354);
  check_field(&p, 2, 16, 12582912 + 32768, pl_align_up(4159488 + 1354 * 8, 64),
              PL_ROUTE_CHUNK);
  CHECK_EQ_U64(p.max_spans, 3);
  pl_copy_plan_free(&p);
  pl_dataset *big = open_idx(64, 1024);
  req = request(big, 64, 2, 4);
  req.direct_copy = 1;
  req.extra_sample_bytes = 32;
  make(&CUDA_CAPS, &req, &p);
  CHECK(p.mode == PL_PLAN_DIRECT);
  check_field(&p, 0, 65536, 0, 0, PL_ROUTE_DIRECT);
  check_field(&p, 1, 1, 4194304, 0, PL_ROUTE_GATHER);
  check_field(&p, 2, 32, 4194304 + 256, 64, PL_ROUTE_GATHER);
  CHECK_EQ_U64(p.stage_bytes, 64 + 64 * 32);
  CHECK_EQ_U64(p.max_spans, 66);
  pl_copy_plan_free(&p);
  pl_dataset_destroy(big);
}

/* A reader that writes fields on the device (device_writes): a WHOLE
 * CUDA plan makes room for a span per sample and field, and a batch's
 * copies are the runs each field left in staging, in order; nothing
 * written is one span per field; all of it, none. CPU plans, chunked
 * ones and requests without it keep theirs. */
static void test_device_writes(pl_dataset *ds) {
  pl_plan_request req = request(ds, 8, 2, 2);
  req.extra_sample_bytes = 16;
  req.device_writes = 1;
  pl_copy_plan p;
  make(&CUDA_CAPS, &req, &p);
  CHECK(p.mode == PL_PLAN_WHOLE && p.device_writes);
  CHECK_EQ_U64(p.max_spans, 3 * 8);
  uint64_t off1 = p.fields[1].batch_off, off2 = p.fields[2].batch_off;
  CHECK_EQ_U64(off1, 8 * 3072);
  static uint8_t host[1 << 16];
  pl_span sp[24];
  /* Of 7 samples, field 0 of 1, 2, 5 and 6 on the device, and field 1 of
   * 6 (bits 0 and 1); sample 7's flags are past n. */
  const uint8_t written[8] = {0, 1, 1, 0, 0, 1, 3, 0x80};
  int n = pl_copy_plan_spans_except(&p, written, 7, host, sp);
  CHECK_EQ_U64(n, 4);
  /* field 0: [0, 1), [3, 5); sample 6 wrote field 0 too: done */
  CHECK(sp[0].src == host && sp[0].dst_off == 0 && sp[0].len == 3072);
  CHECK(sp[1].src == host + 3 * 3072 && sp[1].dst_off == 3 * 3072 &&
        sp[1].len == 2 * 3072);
  /* field 1: [0, 6) (sample 6 wrote it) */
  CHECK(sp[2].src == host + off1 && sp[2].dst_off == off1 &&
        sp[2].len == 6 * 8);
  /* field 2 (the extra one, never the reader's): all 7 samples */
  CHECK(sp[3].src == host + off2 && sp[3].dst_off == off2 &&
        sp[3].len == 7 * 16);
  /* Nothing written: a span per field; everything: none. */
  CHECK_EQ_U64(pl_copy_plan_spans_except(&p, NULL, 8, host, sp), 3);
  CHECK(sp[0].len == 8 * 3072 && sp[1].len == 64 && sp[2].len == 128);
  const uint8_t all[1] = {0x07};
  pl_copy_plan one = p;
  one.nfields = 2; /* the dataset's own fields, both written */
  CHECK_EQ_U64(pl_copy_plan_spans_except(&one, all, 1, host, sp), 0);
  pl_copy_plan_free(&p);
  /* The CPU writes the batch itself: no device writes. */
  pl_backend_caps cpu = pl_backend_cpu_caps();
  make(&cpu, &req, &p);
  CHECK(!p.device_writes && p.max_spans == 1);
  pl_copy_plan_free(&p);
  req.device_writes = 0;
  make(&CUDA_CAPS, &req, &p);
  CHECK(!p.device_writes && p.max_spans == 1);
  pl_copy_plan_free(&p);
}

int main(void) {
  (void)fixture_check_batch;
  fixture fx = {0};
  pl_dataset *ds = fixture_dataset(&fx, 1000, 3072);
  test_whole(ds);
  test_chunked(ds);
  test_small_chunks();
  test_cpu(ds);
  test_direct_refused(ds);
  test_direct();
  test_extra_field(ds);
  test_device_writes(ds);
#ifdef PL_FAULT_INJECTION
  test_alloc_faults();
#endif
  pl_dataset_destroy(ds);
  return pl_test_finish("test_copy_plan");
}
