/* What a JPEG's header says, read without a decoder: the size, the coding
 * process and the components, so that the image source can tell which
 * images nvJPEG's batched decode takes (data/gpu_decode.h) before handing
 * it any. */
#ifndef PL_JPEG_PROBE_H
#define PL_JPEG_PROBE_H

#include "core/common.h"

typedef enum {
  PL_JPEG_NOT = 0,      /* not a JPEG, or its header is cut or broken */
  PL_JPEG_BASELINE,     /* SOF0 / SOF1: sequential Huffman, 8-bit */
  PL_JPEG_PROGRESSIVE,  /* SOF2 */
  PL_JPEG_OTHER         /* lossless, arithmetic, 12-bit, ... */
} pl_jpeg_kind;

typedef struct pl_jpeg_info {
  pl_jpeg_kind kind;
  int has_end;    /* an EOI marker (FF D9) in the last 4 KiB: not cut short */
  uint32_t width, height;
  int components; /* 1 gray, 3 YCbCr, 4 CMYK / YCCK */
  int h[4], v[4]; /* sampling factors of each component */
  /* Every quantization table the frame names and every Huffman table the
   * first scan names is defined before that scan, and every table id (0-3),
   * DQT precision and DHT class (0-1) read is in range. nvJPEG's batched
   * decode does not always refuse a JPEG that lacks one: measured on the
   * H200 (hardware backend, CUDA 13), a file without DQT or DHT, refused
   * alone, was decoded in a batch beside others, with another image's
   * tables, it seems. Such files (motion-JPEG frames have no DHT) go to
   * the CPU, where libjpeg-turbo supplies the standard Huffman tables or
   * fails with the cause. */
  int tables;
  int extended;        /* SOF1 (extended sequential; 16-bit tables) */
  int scan_components; /* of the first scan: all of them when interleaved */
} pl_jpeg_info;

/* Reads the markers of data[0..n) up to the first scan header. */
void pl_jpeg_probe(const uint8_t *data, size_t n, pl_jpeg_info *out);

/* Whether the GPU path takes it: whole (has_end: a batched nvJPEG decode
 * fails as a whole on one bad image, or may decode a cut one without a
 * word), its tables defined (tables), baseline proper (SOF0: nvJPEG's
 * hardware decoder is for baseline JPEG) in one interleaved scan (not a
 * scan per component), the kinds measured on the GPU against the CPU; 8-bit, three components with
 * chroma at 1x1 and luma at 1 or 2 each way (4:4:4, 4:2:2, 4:2:0, 4:4:0:
 * what nvJPEG's hardware and GPU decoders both take in a batch). */
int pl_jpeg_gpu_ok(const pl_jpeg_info *in);

#endif /* PL_JPEG_PROBE_H */
