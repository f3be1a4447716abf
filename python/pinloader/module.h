/* What the files of the pinloader._pinloader extension share.
 *
 * The files form a tree (scripts/check-layers.py checks that no circle of
 * calls forms): the module file at the root calls each part's init; the
 * parts call each other downwards only; the leaves, common.c and fields.c,
 * call none of them.
 *
 *   _pinloader.c  the module: its functions, each part's init
 *   iter.c        the iterator a DataLoader hands out (LoaderIter): no batch
 *                 is lost to Ctrl-C; explicit orders (set_order)
 *   loader.c      Loader: the option table, the log hook, next()
 *   batches.c     Batch, FieldArray: the batch holder, DLPack export
 *   samples.c     SampleWriter: a sample's common case written into its
 *                 place in the batch in C (the rest: _collate.write_sample)
 *   datasets.c    Dataset: native sources, Python datasets through the
 *                 per-sample callback, field values
 *   procset.c     worker processes: the ProcSet type and the batch callback
 *                 that sends a batch's indices to a worker process and waits
 *                 for it, without the GIL, while the process writes the
 *                 samples into shared batch memory (procset.h: its parts,
 *                 channels.c, wire.c, split.c, local_fill.c, cpu_time.c)
 *   common.c      pinloader.Error, thread-local read flags, shape tuples
 *   fields.c      the dtype table and the field-tuple parser
 *
 * Everything here has hidden visibility (the module exports PyInit only). */
#ifndef PL_PY_MODULE_H
#define PL_PY_MODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "dlpack.h"
#include "pinloader.h"

typedef struct pycb pycb;

typedef struct {
  PyObject_HEAD
  pl_dataset *ds;
  pycb *cb; /* borrowed from ds's user data; NULL for native datasets */
} DatasetObject;

typedef struct {
  PyObject_HEAD
  pl_loader *ld;
  DatasetObject *dso;
  int busy; /* a call is waiting with the GIL released */
  pl_loader_config cfg; /* as created: .options */
  /* iter.c: a batch (or the item packed from it) taken from the C loader
   * but not yet handed to the consumer because Ctrl-C (or an error while
   * packing) came first; the next next() returns it first. */
  PyObject *pending;
  /* iter.c: how the last next() of any iterator over it ended. */
  int it_mid_epoch, it_resumable;
} LoaderObject;

extern PyObject *Error;
/* Nonzero while this thread runs Python code for a loader's read (a
 * __getitem__): a loader freed then must not be joined from here. */
extern _Thread_local int in_getitem;
/* Set while this thread waits in a loader's next(): a KeyboardInterrupt
 * raised by a read it runs itself (num_workers=0) is kept here, as itself,
 * and raised by that next() once the batch has been given back. */
extern _Thread_local PyObject **consumer_interrupt;
extern PyTypeObject DatasetType, LoaderType, BatchType, FieldArrayType;

/* fields.c: dtypes by name, buffer format and DLPack code; fields from a
 * sequence of (name, dtype, shape[, offset]) tuples (PyMem_Calloc'ed;
 * offsets may be NULL; a name of PL_NAME_MAX bytes or more is refused). */
int dtype_from_name(const char *name, pl_dtype *out);
int dtype_from_format(const char *fmt, Py_ssize_t itemsize, pl_dtype *out);
const char *format_of(pl_dtype t);
DLDataType dl_dtype(pl_dtype t);
int fields_from(PyObject *seq, pl_field **fields, uint64_t **offsets, int *n);
/* common.c: a shape as a tuple; "uint8 (3, 32, 32)" for messages. */
PyObject *shape_tuple(int ndim, const int64_t *shape);
void describe_c(pl_dtype t, int ndim, const int64_t *shape, char *buf, size_t n);
/* datasets.c: the stored exception of the Python sample err names,
 * re-raised as itself with a note naming the sample. */
PyObject *raise_callback(pycb *cb, const pl_error *err);

/* common.c: pinloader.Error from a status and message, or a pl_error. */
PyObject *raise_status(pl_status s, const char *message);
PyObject *raise_pl(const pl_error *err);
/* The error of a failed pl_loader_next, as the consumer should see it. */
PyObject *raise_next(LoaderObject *self, const pl_error *err);
/* A Batch object owning b (released when the last reference goes). */
PyObject *batch_wrap(pl_batch *b);
/* Guards a call that releases the GIL; the caller clears self->busy. */
int loader_enter(LoaderObject *self);
/* A Dataset object owning ds; cb is NULL but for per-sample callbacks. */
PyObject *dataset_wrap(pl_dataset *ds, pycb *cb);

/* common.c: PyType_Ready and add to the module. */
int pl_py_add_type(PyObject *m, PyTypeObject *t, const char *name);

/* Each file's part of the module: its types and functions. */
int pl_py_init_datasets(PyObject *m);
int pl_py_init_batches(PyObject *m);
int pl_py_init_loader(PyObject *m);
int pl_py_init_iter(PyObject *m);
int pl_py_init_workers(PyObject *m);
int pl_py_init_samples(PyObject *m);
int pl_py_init_dtypes(PyObject *m); /* fields.c: _pinloader.DTYPES */

static inline int py_finalizing(void) {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

#endif /* PL_PY_MODULE_H */
