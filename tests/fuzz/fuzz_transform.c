/* Fuzz the transform plan and the host reference: one field's dtype and
 * shape and up to 6 transforms (any kind, field, sizes, padding, p, dtype,
 * mean/std, layouts) from the input's first bytes; a plan that compiles is
 * run on a sample made of the remaining bytes with draws for several
 * indices, and every output element must be one of the table's entries
 * (for images) or the widened input (for labels). A plan that does not
 * compile must say why. */
#include "fuzz_common.h"

#include "data/transform.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct producer {
  const uint8_t *p;
  size_t n;
} producer;

static uint32_t take(producer *pr, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; i++) {
    v |= (uint32_t)(pr->n ? pr->p[0] : 0) << (8 * i);
    if (pr->n)
      pr->p++, pr->n--;
  }
  return v;
}

static void make_field(producer *pr, pl_field *f) {
  memset(f, 0, sizeof *f);
  snprintf(f->name, sizeof f->name, take(pr, 1) & 1 ? "image" : "label");
  f->dtype = (pl_dtype)(take(pr, 1) % PL_DTYPE_COUNT_);
  f->ndim = (int)(take(pr, 1) % 4);
  for (int d = 0; d < f->ndim; d++)
    f->shape[d] = 1 + take(pr, 1) % 40;
}

static void make_transform(producer *pr, pl_transform *t) {
  pl_transform_init(t, (pl_transform_kind)(take(pr, 1) % (PL_TRANSFORM_KIND_COUNT_ + 1)));
  uint32_t sel = take(pr, 1);
  t->field = sel % 3 == 0 ? NULL : sel % 3 == 1 ? "image" : "label";
  t->input_layout = (pl_layout)(take(pr, 1) % 4);
  t->size[0] = (int32_t)(take(pr, 1) % 48) - 2;
  t->size[1] = (int32_t)(take(pr, 1) % 48) - 2;
  t->padding = (int32_t)(take(pr, 1) % 12) - 1;
  t->fill = (uint8_t)take(pr, 1);
  t->p = (float)take(pr, 1) / 200.0f;
  t->dtype = (pl_dtype)(take(pr, 1) % (PL_DTYPE_COUNT_ + 1));
  t->num_channels = (int)(take(pr, 1) % 6);
  for (int c = 0; c < PL_TRANSFORM_MAX_CHANNELS; c++) {
    t->mean[c] = (float)take(pr, 1) / 100.0f;
    t->std[c] = ((float)take(pr, 1) - 20.0f) / 50.0f;
  }
  t->layout = (pl_layout)(take(pr, 1) % 4);
}

static void check_image(const pl_xform_plan *p, const pl_xform_field *x,
                        const uint8_t *out) {
  uint64_t n = x->out_bytes / x->out_size;
  for (uint64_t e = 0; e < n; e++) {
    int found = 0;
    for (uint64_t k = 0; k < 256ull * (uint64_t)x->C && !found; k++)
      found = !memcmp(out + e * x->out_size,
                      p->table + x->table_off + k * x->out_size, x->out_size);
    if (!found)
      abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  producer pr = {data, size};
  pl_field f;
  make_field(&pr, &f);
  pl_transform t[6];
  int n = (int)(take(&pr, 1) % 7);
  for (int i = 0; i < n; i++)
    make_transform(&pr, &t[i]);
  pl_xform_plan *p = NULL;
  pl_error err;
  if (pl_field_bytes(&f) == 0 && f.ndim > 0)
    return 0;
  if (pl_xform_plan_new(&f, 1, t, n, &p, &err) != PL_OK) {
    if (p || err.message[0] == '\0')
      abort();
    return 0;
  }
  if (!p)
    return 0;
  const pl_xform_field *x = &p->f[0];
  uint8_t *in = calloc(1, (size_t)x->in_bytes + 1);
  uint8_t *out = calloc(1, (size_t)x->out_bytes + 1);
  if (in && out) {
    memcpy(in, pr.p, (size_t)(pr.n < x->in_bytes ? pr.n : x->in_bytes));
    for (uint64_t idx = 0; idx < 4; idx++) {
      pl_xform_params draws[2];
      pl_xform_draw(p, take(&pr, 2), idx, idx * 977, draws);
      if (x->slot >= 0 && (draws[0].oy < 0 || draws[0].ox < 0 ||
                           draws[0].oy > x->H + 2 * x->pad - x->OH ||
                           draws[0].ox > x->W + 2 * x->pad - x->OW))
        abort();
      pl_xform_apply(p, x, draws, in, out);
      if (x->op == PL_XF_IMAGE)
        check_image(p, x, out);
    }
  }
  free(in);
  free(out);
  pl_xform_plan_free(p);
  return 0;
}
