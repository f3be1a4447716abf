/* Streaming copies into batch memory; see memcopy.h for why. */
#include "core/memcopy.h"

#include <stdint.h>
#include <string.h>

/* Per-thread by design: each worker decides for the batches it fills. */
static _Thread_local int streaming;

void pl_copy_set_streaming(int on) { streaming = on; }

#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>

/* Below this a copy stays in cache-friendly memcpy: the setup of the
 * streaming loop costs more than the read-for-ownership it saves. */
enum { STREAM_MIN = 1024 };

void pl_copy_stream(void *dst, const void *src, size_t n) {
  if (!streaming || n < STREAM_MIN) {
    memcpy(dst, src, n);
    return;
  }
  uint8_t *d = dst;
  const uint8_t *s = src;
  size_t head = (16 - ((uintptr_t)d & 15)) & 15; /* stores must be aligned */
  memcpy(d, s, head);
  d += head, s += head, n -= head;
  for (; n >= 64; d += 64, s += 64, n -= 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)s);
    __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
    __m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
    _mm_stream_si128((__m128i *)d, a);
    _mm_stream_si128((__m128i *)(d + 16), b);
    _mm_stream_si128((__m128i *)(d + 32), c);
    _mm_stream_si128((__m128i *)(d + 48), e);
  }
  for (; n >= 16; d += 16, s += 16, n -= 16)
    _mm_stream_si128((__m128i *)d, _mm_loadu_si128((const __m128i *)s));
  memcpy(d, s, n);
}

void pl_copy_fence(void) { _mm_sfence(); }

#else

void pl_copy_stream(void *dst, const void *src, size_t n) {
  memcpy(dst, src, n);
}

void pl_copy_fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

#endif
