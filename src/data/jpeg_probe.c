/* The JPEG marker walk of jpeg_probe.h (ITU T.81 B.1): SOI, then marker
 * segments (FF xx, a 2-byte big-endian length that counts itself) until
 * the first SOFn. */
#include "data/jpeg_probe.h"

#include <string.h>

static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }

/* The frame header at p (after the length), len bytes of it. */
static void read_frame(const uint8_t *p, uint32_t len, uint8_t marker,
                       pl_jpeg_info *out) {
  if (len < 6)
    return;
  int precision = p[0];
  out->height = be16(p + 1);
  out->width = be16(p + 3);
  out->components = p[5];
  if (out->components < 1 || out->components > 4 ||
      len < 6 + 3u * (uint32_t)out->components || !out->width ||
      !out->height)
    return;
  for (int c = 0; c < out->components; c++) {
    out->h[c] = p[6 + 3 * c + 1] >> 4;
    out->v[c] = p[6 + 3 * c + 1] & 15;
  }
  if ((marker == 0xC0 || marker == 0xC1) && precision == 8)
    out->kind = PL_JPEG_BASELINE;
  else if (marker == 0xC2 && precision == 8)
    out->kind = PL_JPEG_PROGRESSIVE;
  else
    out->kind = PL_JPEG_OTHER;
}

static int is_sof(uint8_t m) {
  return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

/* Files often carry bytes after EOI (padding, trailers): look back a way. */
static int has_end(const uint8_t *data, size_t n) {
  size_t from = n > 4096 ? n - 4096 : 0;
  for (size_t i = n - 1; i > from; i--)
    if (data[i] == 0xD9 && data[i - 1] == 0xFF)
      return 1;
  return 0;
}

void pl_jpeg_probe(const uint8_t *data, size_t n, pl_jpeg_info *out) {
  memset(out, 0, sizeof *out);
  if (n < 4 || data[0] != 0xFF || data[1] != 0xD8)
    return;
  out->has_end = has_end(data, n);
  size_t i = 2;
  while (i + 4 <= n) {
    if (data[i] != 0xFF)
      return; /* a segment must start at a marker */
    uint8_t m = data[i + 1];
    if (m == 0xFF) { /* fill byte */
      i++;
      continue;
    }
    if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) { /* no length */
      i += 2;
      continue;
    }
    if (m == 0xD9 || m == 0xDA)
      return; /* image end or scan before any frame header */
    uint32_t len = be16(data + i + 2);
    if (len < 2 || i + 2 + len > n)
      return;
    if (is_sof(m)) {
      read_frame(data + i + 4, len - 2, m, out);
      return;
    }
    i += 2 + len;
  }
}

int pl_jpeg_gpu_ok(const pl_jpeg_info *in) {
  if (!in->has_end || in->kind != PL_JPEG_BASELINE || in->components != 3)
    return 0;
  if (in->h[1] != 1 || in->v[1] != 1 || in->h[2] != 1 || in->v[2] != 1)
    return 0;
  return in->h[0] >= 1 && in->h[0] <= 2 && in->v[0] >= 1 && in->v[0] <= 2;
}
