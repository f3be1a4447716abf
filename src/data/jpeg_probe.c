/* The JPEG marker walk of jpeg_probe.h (ITU T.81 B.1): SOI, then marker
 * segments (FF xx, a 2-byte big-endian length that counts itself) until
 * the first SOS: the frame header (SOFn) for the size, process and
 * components, and the tables defined before the scan (DQT, DHT) for the
 * ones the frame and the scan name. */
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

/* The tables defined so far, and the quantization tables the frame names
 * (bit i: table id i). A table id past 3 (T.81 allows 0-3), a DQT
 * precision or a DHT class past 1, is a broken file (libjpeg-turbo stops
 * at it: JERR_DQT_INDEX, JERR_DHT_INDEX): `bad`, never folded into a
 * valid id, which would let nvJPEG decode it with another image's table. */
typedef struct tables {
  unsigned dqt, dc, ac, frame_q;
  int frame;  /* a frame header was read */
  int bad;    /* a table id, precision or class out of range */
} tables;

/* Bit `id` of *set, or t->bad where id is no table id. */
static void mark_id(unsigned *set, unsigned id, tables *t) {
  if (id > 3)
    t->bad = 1;
  else
    *set |= 1u << id;
}

/* DQT: (Pq Tq, 64 or 128 bytes)... */
static void read_dqt(const uint8_t *p, uint32_t len, tables *t) {
  for (uint32_t k = 0; k < len;) {
    unsigned precision = p[k] >> 4;
    uint32_t bytes = precision ? 128 : 64;
    if (k + 1 + bytes > len)
      return;
    t->bad |= precision > 1;
    mark_id(&t->dqt, p[k] & 15, t);
    k += 1 + bytes;
  }
}

/* DHT: (Tc Th, 16 counts, their values)... */
static void read_dht(const uint8_t *p, uint32_t len, tables *t) {
  for (uint32_t k = 0; k + 17 <= len;) {
    uint32_t values = 0;
    for (int b = 1; b <= 16; b++)
      values += p[k + b];
    if (k + 17 + values > len)
      return;
    unsigned cls = p[k] >> 4;
    t->bad |= cls > 1;
    mark_id(cls ? &t->ac : &t->dc, p[k] & 15, t);
    k += 17 + values;
  }
}

/* SOS: whether the tables its components name, and the frame's, exist. */
static int scan_tables_ok(const uint8_t *p, uint32_t len, tables *t) {
  if (!t->frame || len < 1 || len < 1 + 2u * p[0] || p[0] == 0)
    return 0;
  unsigned dc = 0, ac = 0;
  for (uint32_t c = 0; c < p[0]; c++) {
    mark_id(&dc, p[2 + 2 * c] >> 4, t);
    mark_id(&ac, p[2 + 2 * c] & 15, t);
  }
  return !t->bad && (t->frame_q & ~t->dqt) == 0 && (dc & ~t->dc) == 0 &&
         (ac & ~t->ac) == 0;
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
  tables t = {0};
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
    if (m == 0xD9)
      return; /* image end before any scan */
    uint32_t len = be16(data + i + 2);
    if (len < 2 || i + 2 + len > n)
      return;
    const uint8_t *p = data + i + 4;
    if (m == 0xDA) { /* the first scan: the walk ends */
      out->tables = scan_tables_ok(p, len - 2, &t);
      out->scan_components = len > 2 ? p[0] : 0;
      return;
    }
    if (m == 0xDB)
      read_dqt(p, len - 2, &t);
    else if (m == 0xC4)
      read_dht(p, len - 2, &t);
    else if (is_sof(m) && !t.frame) {
      read_frame(p, len - 2, m, out);
      t.frame = out->kind != PL_JPEG_NOT;
      out->extended = m == 0xC1;
      for (int c = 0; c < out->components && 6 + 3u * c + 2 < len - 2; c++)
        mark_id(&t.frame_q, p[6 + 3 * c + 2], &t);
    }
    i += 2 + len;
  }
}

int pl_jpeg_gpu_ok(const pl_jpeg_info *in) {
  if (!in->has_end || !in->tables || in->kind != PL_JPEG_BASELINE ||
      in->extended || in->components != 3 || in->scan_components != 3)
    return 0;
  if (in->h[1] != 1 || in->v[1] != 1 || in->h[2] != 1 || in->v[2] != 1)
    return 0;
  return in->h[0] >= 1 && in->h[0] <= 2 && in->v[0] >= 1 && in->v[0] <= 2;
}
