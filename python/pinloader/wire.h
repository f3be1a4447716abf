/* The wire format between the loader's threads and the worker processes
 * (python/pinloader/_worker.py), declared once: here, and exported to
 * Python as _pinloader.WIRE (wire.c), which _worker.py reads.
 *
 * One machine, native byte order. A request is req_head, fd_offset[nfields]
 * and indices[n] as uint64, with the batch memory's memfd attached to its
 * first byte (SCM_RIGHTS); a reply is rep_head and `len` payload bytes. */
#ifndef PL_PY_WIRE_H
#define PL_PY_WIRE_H

#include <stdint.h>

#define REQ_MAGIC 0x51524c50u  /* "PLRQ" */
#define REP_MAGIC 0x50524c50u  /* "PLRP" */
#define MAX_REPLY (1ull << 34) /* a reply larger than this is a broken worker  \
                                */
/* Balanced workers' generators restart every SPLIT_CHUNK samples of a
 * batch (_seeding.seed_chunk), and a split batch is split there. */
#define SPLIT_CHUNK 64

/* req_head.flags */
enum { REQ_RESEED = 1, REQ_PROGRESS = 2 };
/* Python's parent to its workers only, before the loader's first batch
 * (never sent from C, declared here so that no flag is taken twice):
 * read the first sample and reply with the template made from it;
 * the template, pickled, for the workers that did not probe. */
enum { REQ_PROBE = 4, REQ_TEMPLATE = 8 };
/* rep_head.status. REP_PROGRESS: "reading sample `len` now" (with a
 * timeout), then more. */
enum { REP_OK = 0, REP_ERROR = 1, REP_PROGRESS = 3 };

typedef struct req_head {
  uint32_t magic, nfields, n, flags;
  uint64_t buffer_id, fd_bytes, epoch, seed, batch_index, base_seed;
  uint64_t first; /* the batch position of indices[0] (a split's chunk) */
} req_head;

typedef struct rep_head {
  uint32_t magic, status;
  uint64_t len;
} rep_head;

/* Python's struct formats of the two heads: they must match the structs
 * (wire.c checks the sizes at compile time). */
#define REQ_FORMAT "=4I7Q"
#define REP_FORMAT "=IIQ"

#endif /* PL_PY_WIRE_H */
