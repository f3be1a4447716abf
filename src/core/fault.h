/* Test-only fault injection: make chosen operations fail on purpose.
 *
 * Only a build with -DPL_FAULT_INJECTION=ON (CMake option PL_FAULT_INJECTION)
 * has it; in every other build PL_FAULT() is the constant 0 and costs
 * nothing. It is not a public knob: tests include this internal header.
 *
 * A fault point fires when its countdown reaches zero: pl_fault_arm(point,
 * after, count) lets `after` hits pass, then fails the next `count` hits
 * (count < 0: forever). The table is process-global by design: it exists
 * only in test builds, where a global is the simplest honest mechanism. */
#ifndef PL_FAULT_H
#define PL_FAULT_H

typedef enum pl_fault_point {
  PL_FAULT_FILE_OPEN = 0, /* open()/fstat() of a data file */
  PL_FAULT_FILE_MAP,      /* mmap() of a data file */
  PL_FAULT_GZ_READ,       /* decompressing a .gz file */
  PL_FAULT_HOST_ALLOC,    /* pageable batch buffer allocation */
  PL_FAULT_PIN_ALLOC,     /* page-locked allocation / registration */
  PL_FAULT_DEVICE_ALLOC,  /* device memory allocation */
  PL_FAULT_COPY,          /* host-to-device copy submission */
  PL_FAULT_THREAD_CREATE, /* starting a worker thread */
  PL_FAULT_ALLOC,         /* the library's own bookkeeping memory (pl_malloc:
                             handles, plans, span arrays, slot tables, CUDA
                             events) */
  PL_FAULT_NVJPEG_REFUSE, /* nvJPEG refusing a batched decode call (ROI or
                             whole images), as it does one bad image's */
  PL_FAULT_NVJPEG_FAIL,   /* nvJPEG failing a batched decode call (a kernel,
                             memory): no refusal, an error */
  PL_FAULT_POINT_COUNT_
} pl_fault_point;

#ifdef PL_FAULT_INJECTION
int pl_fault_hit(pl_fault_point p);
void pl_fault_arm(pl_fault_point p, long after, long count);
void pl_fault_reset(void);
#define PL_FAULT(p) pl_fault_hit(p)
#else
#define PL_FAULT(p) 0
#endif

#endif /* PL_FAULT_H */
