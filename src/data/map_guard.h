/* Surviving a data file that shrinks while it is mapped.
 *
 * A read from a file mapping past the file's current end raises SIGBUS:
 * that happens when a file is truncated, or rewritten with `cp` (which
 * truncates first), while a loader reads it. Nothing can prevent it from
 * outside the reading thread (see docs/reliability.md, "Files that change
 * underneath", for the alternatives and why they do not work), so the
 * reads themselves recover:
 *
 *   - every file mapping is registered here (pl_map_guard_register), and
 *   - every stretch of code that reads from mappings (a batch, a chunk, one
 *     pl_dataset_read) runs under a guard: a per-thread recovery point set
 *     with sigsetjmp (no signal mask saved: no syscall), pushed on a
 *     per-thread stack so that guards nest.
 *
 * A SIGBUS whose address lies in a registered mapping, raised by the kernel
 * in a thread that has a guard, jumps back to that guard, which turns it
 * into PL_IO "FILE: the file changed while it was being read (it is N
 * bytes now, was M)". Any other SIGBUS goes to the handler that was
 * installed before ours (or the default action, which kills the process as
 * before).
 *
 * Why a process-global signal handler in a library that has no global
 * state otherwise: a signal disposition is process-global by nature; the
 * only alternative is to never read a mapping, which costs a copy of every
 * byte. The handler is installed when the first mapping is registered and
 * removed when the last one goes (refcounted, thread-safe), and only when
 * it is still the installed one (a handler installed after ours that
 * chains to it keeps working: ours then just chains on). A handler
 * installed after ours that does not chain to it disables the recovery.
 * The handler is async-signal-safe: it reads atomics and calls siglongjmp
 * or the previous handler, nothing else.
 *
 * The jump skips the frames between the guard and the faulting read: code
 * under a guard must not take locks or allocate in between (the sources'
 * reads are memcpy loops; a callback source's own code never reads our
 * mappings). */
#ifndef PL_MAP_GUARD_H
#define PL_MAP_GUARD_H

#include "core/common.h"

#include <setjmp.h>

typedef struct pl_map_guard {
  sigjmp_buf jump;
  struct pl_map_guard *outer;        /* the guard this one nests in */
  volatile uintptr_t fault_addr;     /* set by the handler */
} pl_map_guard;

/* Registers [addr, addr + len), a mapping of `path` (kept by pointer: it
 * must outlive the registration) that was `size` bytes when mapped.
 * Installs the handler with the first registration. */
pl_status pl_map_guard_register(const void *addr, size_t len,
                                const char *path, pl_error *err);
void pl_map_guard_unregister(const void *addr);

/* Arms a guard in the calling frame: 0 at once, nonzero when a read under
 * it faulted (then call pl_map_guard_failed). Must be a macro: the frame
 * that called sigsetjmp must still be live when the handler jumps. */
#define pl_map_guard_enter(g)                                              \
  (sigsetjmp((g)->jump, 0) ? 1 : (pl_map_guard_push(g), 0))

void pl_map_guard_push(pl_map_guard *g);
/* Disarms g (the innermost guard of this thread). */
void pl_map_guard_leave(pl_map_guard *g);
/* After a fault: disarms g and writes the error naming the file. */
pl_status pl_map_guard_failed(pl_map_guard *g, pl_error *err);

/* Whether the handler is installed now (tests). */
bool pl_map_guard_installed(void);

#endif /* PL_MAP_GUARD_H */
