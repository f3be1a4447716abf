/*
 * pinloader._pinloader: the CPython binding of include/pinloader.h.
 *
 * Uses the public C API only. Objects:
 *   Dataset     owns a pl_dataset (native files, or a Python map-style
 *               dataset read through pl_dataset_from_callback).
 *   Loader      owns a pl_loader; next() returns a Batch or None at the end
 *               of an epoch.
 *   Batch       a Python handle on a batch holder (below).
 *   FieldArray  one field of a batch, exported through DLPack
 *               (__dlpack__ / __dlpack_device__) and, for host batches, the
 *               buffer protocol.
 *
 * Batch lifetime. A batch holder is a small C struct with an atomic
 * reference count: one reference per Batch / FieldArray object and one per
 * DLManagedTensor handed to a consumer. The last reference releases the
 * pl_batch on the CUDA stream the consumer last named in __dlpack__(stream).
 * Being plain C, a DLPack deleter never needs the GIL, so a framework may
 * free tensors from any thread, also during interpreter shutdown.
 *
 * The GIL. Every call that may wait on the loader (next, set_epoch,
 * load_state, create, destroy) runs with the GIL released, because the
 * loader's worker threads take the GIL to call a Python dataset's
 * __getitem__: holding it while waiting for them would deadlock.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "dlpack.h"
#include "pinloader.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long one wait for a batch lasts before checking for Ctrl-C. */
#define WAIT_SLICE_S 0.1
/* Samples larger than this are copied with the GIL released. */
#define COPY_WITHOUT_GIL_BYTES (256 * 1024)
/* How the callback's message names the failed call (raise_callback takes
 * the sample index from pl_error.sample_index, not from this text). */
#define GETITEM_MARK "__getitem__("

static PyObject *Error; /* pinloader.Error(RuntimeError) */
/* Nonzero while this thread runs a Python dataset's __getitem__ for a
 * loader: a loader freed then (the GC ran inside __getitem__) may be the one
 * whose worker this is, so it must not be joined from here. */
static _Thread_local int in_getitem;
static PyTypeObject DatasetType, LoaderType, BatchType, FieldArrayType;

static int py_finalizing(void) {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

/* ------------------------------------------------------------ errors */

static PyObject *none_ref(void) {
  Py_INCREF(Py_None);
  return Py_None;
}

static int set_attr(PyObject *exc, const char *name, PyObject *v) {
  int rc = v ? PyObject_SetAttrString(exc, name, v) : -1;
  Py_XDECREF(v);
  return rc;
}

/* The structured fields of a pl_error (None where the error has none), so
 * that nothing needs to parse the message. */
static int set_error_fields(PyObject *exc, const pl_error *err) {
  int has_sample = err && err->sample_index != UINT64_MAX;
  int has_path = err && err->path[0];
  int has_errno = err && err->sys_errno;
  int has_cuda = err && err->cuda_error;
  if (set_attr(exc, "sample_index",
               has_sample ? PyLong_FromUnsignedLongLong(err->sample_index)
                          : none_ref()) < 0 ||
      set_attr(exc, "path",
               has_path ? PyUnicode_DecodeFSDefault(err->path)
                        : none_ref()) < 0 ||
      set_attr(exc, "errno",
               has_errno ? PyLong_FromLong(err->sys_errno)
                         : none_ref()) < 0)
    return -1;
  return set_attr(exc, "cuda_error", has_cuda ? PyLong_FromLong(err->cuda_error)
                                              : none_ref());
}

/* Raise pinloader.Error(message) with .status = "PL_...", .code, and the
 * error's fields (.sample_index, .path, .errno, .cuda_error; err may be
 * NULL: all None). */
static PyObject *raise_error(pl_status s, const char *message,
                             const pl_error *err) {
  const char *msg = (message && message[0]) ? message : pl_status_str(s);
  PyObject *exc = PyObject_CallFunction(Error, "s", msg);
  if (!exc)
    return NULL;
  if (set_attr(exc, "status", PyUnicode_FromString(pl_status_name(s))) == 0 &&
      set_attr(exc, "code", PyLong_FromLong((long)s)) == 0 &&
      set_error_fields(exc, err) == 0)
    PyErr_SetObject(Error, exc);
  Py_DECREF(exc);
  return NULL;
}

static PyObject *raise_status(pl_status s, const char *message) {
  return raise_error(s, message, NULL);
}

static PyObject *raise_pl(const pl_error *err) {
  return raise_error(err->status, err->message, err);
}

/* ------------------------------------------------------------ dtypes */

static int dtype_from_name(const char *name, pl_dtype *out) {
  for (int t = 0; t < PL_DTYPE_COUNT_; t++)
    if (strcmp(pl_dtype_name((pl_dtype)t), name) == 0) {
      *out = (pl_dtype)t;
      return 0;
    }
  PyErr_Format(PyExc_ValueError, "unknown dtype '%s'", name);
  return -1;
}

/* The dtype with this DLPack type code (0 int, 1 uint, 2 float) and size,
 * from PL_DTYPE_MAP; -1 when there is none. */
static int dtype_of_kind(int dlpack, size_t bytes, pl_dtype *out) {
#define PL_DTYPE_KIND_(NAME, name, size, format, code)                        \
  if (dlpack == (code) && bytes == (size)) {                                   \
    *out = PL_##NAME;                                                          \
    return 0;                                                                  \
  }
  PL_DTYPE_MAP(PL_DTYPE_KIND_)
#undef PL_DTYPE_KIND_
  return -1;
}

/* struct-module format of a buffer → pl_dtype; -1 when not representable.
 * Native or little-endian byte order only (the library is little-endian).
 * Any integer or float character maps by its kind and the item size ('l'
 * is int64 where long has 8 bytes). */
static int dtype_from_format(const char *fmt, Py_ssize_t itemsize,
                             pl_dtype *out) {
  if (!fmt)
    fmt = "B";
  if (*fmt == '@' || *fmt == '=' || *fmt == '<')
    fmt++;
  else if ((*fmt == '>' || *fmt == '!') && itemsize != 1)
    return -1;
  else if (*fmt == '>' || *fmt == '!')
    fmt++;
  if (fmt[0] == '\0' || fmt[1] != '\0' || itemsize < 1)
    return -1;
  int kind = strchr("bhilq", fmt[0])    ? 0
             : strchr("BHILQ?", fmt[0]) ? 1
             : strchr("efd", fmt[0])    ? 2
                                        : -1;
  return kind < 0 ? -1 : dtype_of_kind(kind, (size_t)itemsize, out);
}

static const char *format_of(pl_dtype t) {
  static const char f[PL_DTYPE_COUNT_][2] = {
#define PL_DTYPE_FORMAT_(NAME, name, bytes, format, dlpack) \
  [PL_##NAME] = {format, 0},
      PL_DTYPE_MAP(PL_DTYPE_FORMAT_)
#undef PL_DTYPE_FORMAT_
  };
  return ((unsigned)t < PL_DTYPE_COUNT_) ? f[t] : "B";
}

static DLDataType dl_dtype(pl_dtype t) {
  static const uint8_t codes[PL_DTYPE_COUNT_] = {
#define PL_DTYPE_DLPACK_(NAME, name, bytes, format, dlpack) [PL_##NAME] = dlpack,
      PL_DTYPE_MAP(PL_DTYPE_DLPACK_)
#undef PL_DTYPE_DLPACK_
  };
  DLDataType d = {(unsigned)t < PL_DTYPE_COUNT_ ? codes[t] : kDLUInt,
                  (uint8_t)(pl_dtype_size(t) * 8), 1};
  return d;
}

static PyObject *shape_tuple(int ndim, const int64_t *shape) {
  PyObject *t = PyTuple_New(ndim);
  for (int i = 0; t && i < ndim; i++) {
    PyObject *v = PyLong_FromLongLong(shape[i]);
    if (!v) {
      Py_CLEAR(t);
      break;
    }
    PyTuple_SET_ITEM(t, i, v);
  }
  return t;
}

/* "uint8 (3, 32, 32)" for messages. */
static void describe_c(pl_dtype t, int ndim, const int64_t *shape, char *buf,
                       size_t n) {
  size_t k = (size_t)snprintf(buf, n, "%s (", pl_dtype_name(t));
  for (int i = 0; i < ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "",
                          (long long)shape[i]);
  if (k < n)
    snprintf(buf + k, n - k, "%s)", ndim == 1 ? "," : "");
}

/* ------------------------------------------------------------ field values
 *
 * One field of one Python sample: a buffer-protocol object (numpy array,
 * bytes, memoryview, numpy scalar), a Python bool/int/float, or anything
 * `convert` (numpy.asarray) turns into a buffer (e.g. a CPU torch tensor). */

typedef struct fieldval {
  pl_dtype dtype;
  int ndim;
  int64_t shape[PL_MAX_DIMS];
  Py_buffer view;
  int has_view;
  PyObject *converted;
  union {
    int64_t i;
    double d;
    uint8_t b;
  } scalar;
} fieldval;

static void fieldval_release(fieldval *v) {
  if (v->has_view)
    PyBuffer_Release(&v->view);
  v->has_view = 0;
  Py_CLEAR(v->converted);
}

static int fieldval_scalar(PyObject *item, fieldval *v) {
  v->ndim = 0;
  if (PyBool_Check(item)) {
    v->dtype = PL_UINT8;
    v->scalar.b = item == Py_True;
    return 0;
  }
  if (PyLong_Check(item)) {
    v->dtype = PL_INT64;
    v->scalar.i = PyLong_AsLongLong(item);
    return (v->scalar.i == -1 && PyErr_Occurred()) ? -1 : 0;
  }
  v->dtype = PL_FLOAT64;
  v->scalar.d = PyFloat_AsDouble(item);
  return (v->scalar.d == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

static int fieldval_get(PyObject *item, PyObject *convert, fieldval *v) {
  memset(v, 0, sizeof *v);
  if (PyBool_Check(item) || PyLong_Check(item) || PyFloat_Check(item))
    return fieldval_scalar(item, v);
  if (!PyObject_CheckBuffer(item) && convert && convert != Py_None) {
    v->converted = PyObject_CallOneArg(convert, item);
    if (!v->converted)
      return -1;
    item = v->converted;
  }
  if (PyObject_GetBuffer(item, &v->view, PyBUF_FULL_RO) < 0)
    return -1;
  v->has_view = 1;
  if (v->view.ndim > PL_MAX_DIMS) {
    PyErr_Format(PyExc_ValueError, "a field has %d dimensions (at most %d)",
                 v->view.ndim, PL_MAX_DIMS);
    return -1;
  }
  if (dtype_from_format(v->view.format, v->view.itemsize, &v->dtype) < 0) {
    PyErr_Format(PyExc_TypeError,
                 "unsupported element type (buffer format '%s', %zd bytes)",
                 v->view.format ? v->view.format : "B", v->view.itemsize);
    return -1;
  }
  v->ndim = v->view.ndim;
  for (int i = 0; i < v->ndim; i++)
    v->shape[i] = v->view.shape ? v->view.shape[i]
                                : v->view.len / v->view.itemsize;
  return 0;
}

static int fieldval_matches(const fieldval *v, const pl_field *f) {
  if (v->dtype != f->dtype || v->ndim != f->ndim)
    return 0;
  for (int i = 0; i < f->ndim; i++)
    if (v->shape[i] != f->shape[i])
      return 0;
  return 1;
}

static int fieldval_copy(fieldval *v, void *dst, size_t n) {
  if (!v->has_view) {
    memcpy(dst, &v->scalar, n);
    return 0;
  }
  if (!PyBuffer_IsContiguous(&v->view, 'C'))
    return PyBuffer_ToContiguous(dst, &v->view, (Py_ssize_t)n, 'C');
  if (n < COPY_WITHOUT_GIL_BYTES) {
    memcpy(dst, v->view.buf, n);
    return 0;
  }
  /* The view keeps the exporter's memory alive without the GIL. */
  Py_BEGIN_ALLOW_THREADS
  memcpy(dst, v->view.buf, n);
  Py_END_ALLOW_THREADS
  return 0;
}

/* ------------------------------------------------------------ Python datasets
 *
 * The user data of a dataset made by from_callback. `errors` maps a sample
 * index to the exception its __getitem__ raised; it is touched only with the
 * GIL held. A DataLoader makes its own callback dataset, so the map is in
 * effect keyed by the loader. */

enum { MODE_BARE = 0, MODE_SEQUENCE = 1, MODE_DICT = 2 };

typedef struct pycb {
  PyObject *dataset;
  PyObject *convert;
  PyObject *keys; /* tuple of keys, MODE_DICT */
  PyObject *errors;
  int mode;
  int nfields;
  pl_field fields[];
} pycb;

static void pycb_free(void *user) {
  pycb *cb = user;
  if (!cb)
    return;
  if (py_finalizing()) {
    free(cb); /* its objects die with the interpreter; touching them could hang */
    return;
  }
  PyGILState_STATE g = PyGILState_Ensure();
  Py_XDECREF(cb->dataset);
  Py_XDECREF(cb->convert);
  Py_XDECREF(cb->keys);
  Py_XDECREF(cb->errors);
  PyGILState_Release(g);
  free(cb);
}

/* Field i of a sample (new reference). */
static PyObject *pycb_item(const pycb *cb, uint64_t index, PyObject *sample,
                           int i) {
  if (cb->mode == MODE_BARE) {
    Py_INCREF(sample);
    return sample;
  }
  if (cb->mode == MODE_DICT)
    return PyObject_GetItem(sample, PyTuple_GET_ITEM(cb->keys, i));
  return PySequence_GetItem(sample, i);
}

static int pycb_check_len(const pycb *cb, uint64_t index, PyObject *sample) {
  if (cb->mode != MODE_SEQUENCE)
    return 0;
  Py_ssize_t n = PySequence_Size(sample);
  if (n == cb->nfields)
    return 0;
  if (n >= 0)
    PyErr_Format(PyExc_ValueError,
                 "dataset[%llu] has %zd fields but dataset[0] had %d",
                 (unsigned long long)index, n, cb->nfields);
  return -1;
}

static int pycb_write(const pycb *cb, uint64_t index, int i, PyObject *item,
                      void *dst) {
  const pl_field *f = &cb->fields[i];
  fieldval v;
  int rc = fieldval_get(item, cb->convert, &v);
  if (rc == 0 && !fieldval_matches(&v, f)) {
    char got[160], want[160];
    describe_c(v.dtype, v.ndim, v.shape, got, sizeof got);
    describe_c(f->dtype, f->ndim, f->shape, want, sizeof want);
    PyErr_Format(PyExc_ValueError,
                 "dataset[%llu] field %d ('%s') is %s but dataset[0]'s was %s",
                 (unsigned long long)index, i, f->name, got, want);
    rc = -1;
  }
  if (rc == 0)
    rc = fieldval_copy(&v, dst, (size_t)pl_field_bytes(f));
  fieldval_release(&v);
  return rc;
}

/* Reads sample `index` into dst; -1 with a Python exception set. */
static int pycb_fill(const pycb *cb, uint64_t index, void *const *dst) {
  PyObject *key = PyLong_FromUnsignedLongLong(index);
  PyObject *sample = key ? PyObject_GetItem(cb->dataset, key) : NULL;
  Py_XDECREF(key);
  if (!sample)
    return -1;
  int rc = pycb_check_len(cb, index, sample);
  for (int i = 0; rc == 0 && i < cb->nfields; i++) {
    PyObject *item = pycb_item(cb, index, sample, i);
    rc = item ? pycb_write(cb, index, i, item, dst[i]) : -1;
    Py_XDECREF(item);
  }
  Py_DECREF(sample);
  return rc;
}

/* Moves the pending exception into cb->errors[index] and describes it in
 * msg. GIL held. */
static void pycb_store_error(pycb *cb, uint64_t index, char *msg,
                             size_t msg_len) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb && value)
    PyException_SetTraceback(value, tb);
  PyObject *text = value ? PyObject_Str(value) : NULL;
  const char *ctext = text ? PyUnicode_AsUTF8(text) : NULL;
  if (!ctext)
    PyErr_Clear();
  snprintf(msg, msg_len, GETITEM_MARK "%llu) raised %s: %s",
           (unsigned long long)index,
           type ? ((PyTypeObject *)type)->tp_name : "an exception",
           ctext ? ctext : "");
  PyObject *key = PyLong_FromUnsignedLongLong(index);
  if (!key || !value || PyDict_SetItem(cb->errors, key, value) < 0)
    PyErr_Clear(); /* the message still reaches the caller */
  Py_XDECREF(key);
  Py_XDECREF(text);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
}

/* pl_get_item_fn: runs on a loader worker thread (or the consumer's, with
 * no workers). */
static int pycb_get_item(void *user, uint64_t index, void *const *dst,
                         char *msg, size_t msg_len) {
  pycb *cb = user;
  if (py_finalizing()) {
    snprintf(msg, msg_len, "the Python interpreter is shutting down");
    return 2;
  }
  PyGILState_STATE g = PyGILState_Ensure();
  in_getitem++;
  int rc = pycb_fill(cb, index, dst);
  in_getitem--;
  if (rc != 0)
    pycb_store_error(cb, index, msg, msg_len);
  PyGILState_Release(g);
  return rc == 0 ? 0 : 1;
}

/* ------------------------------------------------------------ Dataset */

typedef struct {
  PyObject_HEAD
  pl_dataset *ds;
  pycb *cb; /* borrowed from ds's user data; NULL for native datasets */
} DatasetObject;

static PyObject *dataset_wrap(pl_dataset *ds, pycb *cb) {
  DatasetObject *o = PyObject_New(DatasetObject, &DatasetType);
  if (!o) {
    pl_dataset_destroy(ds);
    return NULL;
  }
  o->ds = ds;
  o->cb = cb;
  return (PyObject *)o;
}

static void dataset_dealloc(DatasetObject *self) {
  pl_dataset_destroy(self->ds);
  PyObject_Free(self);
}

static Py_ssize_t dataset_len(DatasetObject *self) {
  return (Py_ssize_t)pl_dataset_length(self->ds);
}

static PyObject *field_tuple(const pl_field *f) {
  PyObject *shape = shape_tuple(f->ndim, f->shape);
  if (!shape)
    return NULL;
  return Py_BuildValue("(ssN)", f->name, pl_dtype_name(f->dtype), shape);
}

static PyObject *dataset_fields(DatasetObject *self, void *unused) {
  int n = pl_dataset_num_fields(self->ds);
  PyObject *list = PyList_New(n);
  for (int i = 0; list && i < n; i++) {
    PyObject *t = field_tuple(pl_dataset_field(self->ds, i));
    if (!t) {
      Py_CLEAR(list);
      break;
    }
    PyList_SET_ITEM(list, i, t);
  }
  return list;
}

static PyObject *dataset_sample_bytes(DatasetObject *self, void *unused) {
  return PyLong_FromUnsignedLongLong(pl_dataset_sample_bytes(self->ds));
}

static PyObject *dataset_is_python(DatasetObject *self, void *unused) {
  return PyBool_FromLong(self->cb != NULL);
}

static PyObject *raise_callback(pycb *cb, const pl_error *err);

/* read(i) -> tuple of bytes, one per field (pl_dataset_read). */
static PyObject *dataset_read(DatasetObject *self, PyObject *arg) {
  unsigned long long index = PyLong_AsUnsignedLongLong(arg);
  if (index == (unsigned long long)-1 && PyErr_Occurred())
    return NULL;
  int n = pl_dataset_num_fields(self->ds);
  PyObject *out = PyTuple_New(n);
  void *dst[64];
  if (!out)
    return NULL;
  if (n > 64) {
    Py_DECREF(out);
    return PyErr_Format(PyExc_ValueError, "too many fields (%d)", n);
  }
  for (int i = 0; i < n; i++) {
    PyObject *b = PyBytes_FromStringAndSize(
        NULL, (Py_ssize_t)pl_field_bytes(pl_dataset_field(self->ds, i)));
    if (!b) {
      Py_DECREF(out);
      return NULL;
    }
    PyTuple_SET_ITEM(out, i, b);
    dst[i] = PyBytes_AS_STRING(b);
  }
  pl_error err;
  pl_status s;
  Py_BEGIN_ALLOW_THREADS
  s = pl_dataset_read(self->ds, index, dst, &err);
  Py_END_ALLOW_THREADS
  if (s != PL_OK) {
    Py_DECREF(out);
    /* A Python __getitem__'s exception, not left in cb->errors. */
    return s == PL_CALLBACK ? raise_callback(self->cb, &err) : raise_pl(&err);
  }
  return out;
}

static PyMethodDef dataset_methods[] = {
    {"read", (PyCFunction)dataset_read, METH_O,
     "read(index) -> tuple of bytes, one per field"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef dataset_getset[] = {
    {"fields", (getter)dataset_fields, NULL,
     "list of (name, dtype, shape) per field", NULL},
    {"sample_bytes", (getter)dataset_sample_bytes, NULL,
     "bytes of one sample, all fields", NULL},
    {"is_python", (getter)dataset_is_python, NULL,
     "read through a Python __getitem__", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PySequenceMethods dataset_as_sequence = {
    .sq_length = (lenfunc)dataset_len,
};

static PyTypeObject DatasetType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pinloader._pinloader.Dataset",
    .tp_basicsize = sizeof(DatasetObject),
    .tp_dealloc = (destructor)dataset_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A pinloader dataset (made by the module's open_* functions).",
    .tp_methods = dataset_methods,
    .tp_getset = dataset_getset,
    .tp_as_sequence = &dataset_as_sequence,
};

/* ------------------------------------------------------------ constructors */

/* A list of file-system paths → a C array of char* kept alive by `keep`. */
static int paths_from(PyObject *seq, PyObject **keep, const char ***out,
                      int *n) {
  *keep = NULL;
  *out = NULL;
  PyObject *fast = PySequence_Fast(seq, "paths must be a sequence");
  if (!fast)
    return -1;
  Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
  PyObject *bytes = PyList_New(0);
  const char **arr = PyMem_Calloc(len ? (size_t)len : 1, sizeof *arr);
  if (!bytes || !arr)
    goto fail;
  for (Py_ssize_t i = 0; i < len; i++) {
    PyObject *b = NULL;
    if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(fast, i), &b))
      goto fail;
    int rc = PyList_Append(bytes, b);
    Py_DECREF(b);
    if (rc < 0)
      goto fail;
    arr[i] = PyBytes_AS_STRING(b);
  }
  Py_DECREF(fast);
  *keep = bytes;
  *out = arr;
  *n = (int)len;
  return 0;
fail:
  Py_DECREF(fast);
  Py_XDECREF(bytes);
  PyMem_Free(arr);
  if (!PyErr_Occurred())
    PyErr_NoMemory();
  return -1;
}

static PyObject *mod_open_idx(PyObject *m, PyObject *args) {
  PyObject *images = NULL, *labels = NULL;
  if (!PyArg_ParseTuple(args, "O&O&:open_idx", PyUnicode_FSConverter, &images,
                        PyUnicode_FSConverter, &labels)) {
    Py_XDECREF(images);
    return NULL;
  }
  pl_dataset *ds = NULL;
  pl_error err;
  pl_status s;
  Py_BEGIN_ALLOW_THREADS
  s = pl_dataset_open_idx(PyBytes_AS_STRING(images), PyBytes_AS_STRING(labels),
                          &ds, &err);
  Py_END_ALLOW_THREADS
  Py_DECREF(images);
  Py_DECREF(labels);
  return s == PL_OK ? dataset_wrap(ds, NULL) : raise_pl(&err);
}

static PyObject *mod_open_cifar10(PyObject *m, PyObject *arg) {
  PyObject *keep;
  const char **paths;
  int n;
  if (paths_from(arg, &keep, &paths, &n) < 0)
    return NULL;
  pl_dataset *ds = NULL;
  pl_error err;
  pl_status s;
  Py_BEGIN_ALLOW_THREADS
  s = pl_dataset_open_cifar10(paths, n, &ds, &err);
  Py_END_ALLOW_THREADS
  PyMem_Free(paths);
  Py_DECREF(keep);
  return s == PL_OK ? dataset_wrap(ds, NULL) : raise_pl(&err);
}

/* open(kind, [paths], options) -> Dataset: any native source through
 * pl_dataset_open ("tokens", "npy", "images", ...; options "k=v&k=v"). */
static PyObject *mod_open(PyObject *m, PyObject *args) {
  const char *kind, *options;
  PyObject *paths_obj, *keep;
  const char **paths;
  int n;
  if (!PyArg_ParseTuple(args, "sOs:open", &kind, &paths_obj, &options) ||
      paths_from(paths_obj, &keep, &paths, &n) < 0)
    return NULL;
  pl_dataset *ds = NULL;
  pl_error err;
  pl_status s;
  Py_BEGIN_ALLOW_THREADS
  s = pl_dataset_open(kind, paths, n, options, &ds, &err);
  Py_END_ALLOW_THREADS
  PyMem_Free(paths);
  Py_DECREF(keep);
  return s == PL_OK ? dataset_wrap(ds, NULL) : raise_pl(&err);
}

/* replaced(dataset) -> samples the source replaced (on_error="skip"). */
static PyObject *mod_replaced(PyObject *m, PyObject *arg) {
  if (!PyObject_TypeCheck(arg, &DatasetType))
    return PyErr_Format(PyExc_TypeError, "expected a Dataset");
  return PyLong_FromUnsignedLongLong(
      pl_dataset_replaced(((DatasetObject *)arg)->ds));
}

/* (name, dtype, shape) → pl_field; shape a sequence of ints. */
static int field_from(PyObject *name, PyObject *dtype, PyObject *shape,
                      pl_field *f) {
  memset(f, 0, sizeof *f);
  const char *cname = PyUnicode_AsUTF8(name);
  const char *cdtype = cname ? PyUnicode_AsUTF8(dtype) : NULL;
  if (!cdtype)
    return -1;
  if (strlen(cname) >= PL_NAME_MAX) {
    PyErr_Format(PyExc_ValueError, "field name '%s' is longer than %d bytes",
                 cname, PL_NAME_MAX - 1);
    return -1;
  }
  strcpy(f->name, cname);
  if (dtype_from_name(cdtype, &f->dtype) < 0)
    return -1;
  PyObject *fast = PySequence_Fast(shape, "shape must be a sequence of ints");
  if (!fast)
    return -1;
  Py_ssize_t nd = PySequence_Fast_GET_SIZE(fast);
  if (nd > PL_MAX_DIMS) {
    Py_DECREF(fast);
    PyErr_Format(PyExc_ValueError, "field '%s' has %zd dimensions (at most %d)",
                 cname, nd, PL_MAX_DIMS);
    return -1;
  }
  f->ndim = (int)nd;
  for (Py_ssize_t i = 0; i < nd; i++) {
    f->shape[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
    if (f->shape[i] == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return -1;
    }
  }
  Py_DECREF(fast);
  return 0;
}

/* fields: sequence of (name, dtype, shape[, offset]). offsets may be NULL. */
static int fields_from(PyObject *seq, pl_field **fields, uint64_t **offsets,
                       int *n) {
  PyObject *fast = PySequence_Fast(seq, "fields must be a sequence");
  if (!fast)
    return -1;
  Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
  *n = (int)len;
  *fields = PyMem_Calloc(len ? (size_t)len : 1, sizeof **fields);
  if (offsets)
    *offsets = PyMem_Calloc(len ? (size_t)len : 1, sizeof **offsets);
  int rc = (*fields && (!offsets || *offsets)) ? 0 : -1;
  if (rc < 0)
    PyErr_NoMemory();
  for (Py_ssize_t i = 0; rc == 0 && i < len; i++) {
    PyObject *name, *dtype, *shape, *off = NULL;
    PyObject *t = PySequence_Fast_GET_ITEM(fast, i);
    if (!PyTuple_Check(t) ||
        !PyArg_ParseTuple(t, "UUO|O", &name, &dtype, &shape, &off)) {
      if (!PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError,
                        "a field is a tuple (name, dtype, shape, offset)");
      rc = -1;
      break;
    }
    rc = field_from(name, dtype, shape, &(*fields)[i]);
    if (rc == 0 && offsets) {
      (*offsets)[i] = off ? PyLong_AsUnsignedLongLong(off) : 0;
      if (PyErr_Occurred())
        rc = -1;
    }
  }
  Py_DECREF(fast);
  if (rc < 0) {
    PyMem_Free(*fields);
    *fields = NULL;
    if (offsets) {
      PyMem_Free(*offsets);
      *offsets = NULL;
    }
  }
  return rc;
}

static PyObject *mod_open_records(PyObject *m, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"paths", "header_bytes", "record_bytes", "fields",
                           NULL};
  PyObject *paths_obj, *fields_obj;
  unsigned long long header, record;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OKKO:open_records", kwlist,
                                   &paths_obj, &header, &record, &fields_obj))
    return NULL;
  pl_record_format fmt = {.header_bytes = header, .record_bytes = record};
  pl_field *fields;
  uint64_t *offsets;
  if (fields_from(fields_obj, &fields, &offsets, &fmt.nfields) < 0)
    return NULL;
  fmt.fields = fields;
  fmt.offsets = offsets;
  PyObject *keep;
  const char **paths;
  int n;
  PyObject *res = NULL;
  if (paths_from(paths_obj, &keep, &paths, &n) == 0) {
    pl_dataset *ds = NULL;
    pl_error err;
    pl_status s;
    Py_BEGIN_ALLOW_THREADS
    s = pl_dataset_open_records(&fmt, paths, n, &ds, &err);
    Py_END_ALLOW_THREADS
    PyMem_Free(paths);
    Py_DECREF(keep);
    res = s == PL_OK ? dataset_wrap(ds, NULL) : raise_pl(&err);
  }
  PyMem_Free(fields);
  PyMem_Free(offsets);
  return res;
}

static PyObject *mod_to_float32(PyObject *m, PyObject *args) {
  DatasetObject *base;
  const char *field;
  float scale;
  if (!PyArg_ParseTuple(args, "O!sf:to_float32", &DatasetType, &base, &field,
                        &scale))
    return NULL;
  pl_dataset *ds = NULL;
  pl_error err;
  if (pl_dataset_to_float32(base->ds, field, scale, &ds, &err) != PL_OK)
    return raise_pl(&err);
  /* The view reads through base's callback, errors included. */
  return dataset_wrap(ds, base->cb);
}

/* from_callback(dataset, length, fields, mode, keys, convert) */
static PyObject *mod_from_callback(PyObject *m, PyObject *args) {
  PyObject *dataset, *fields_obj, *keys, *convert;
  unsigned long long length;
  int mode;
  if (!PyArg_ParseTuple(args, "OKOiOO:from_callback", &dataset, &length,
                        &fields_obj, &mode, &keys, &convert))
    return NULL;
  if (mode < MODE_BARE || mode > MODE_DICT)
    return PyErr_Format(PyExc_ValueError, "bad mode %d", mode);
  pl_field *fields;
  int n;
  if (fields_from(fields_obj, &fields, NULL, &n) < 0)
    return NULL;
  PyObject *keys_tuple = mode == MODE_DICT ? PySequence_Tuple(keys) : NULL;
  pycb *cb = (mode != MODE_DICT || keys_tuple)
                 ? calloc(1, sizeof *cb + (size_t)n * sizeof(pl_field))
                 : NULL;
  PyObject *errors = cb ? PyDict_New() : NULL;
  if (!errors) {
    free(cb);
    Py_XDECREF(keys_tuple);
    PyMem_Free(fields);
    return PyErr_Occurred() ? NULL : PyErr_NoMemory();
  }
  if (keys_tuple && PyTuple_GET_SIZE(keys_tuple) != n) {
    free(cb);
    Py_DECREF(keys_tuple);
    Py_DECREF(errors);
    PyMem_Free(fields);
    return PyErr_Format(PyExc_ValueError, "%d fields but %zd keys", n,
                        PyTuple_GET_SIZE(keys_tuple));
  }
  Py_INCREF(dataset);
  Py_INCREF(convert);
  *cb = (pycb){.dataset = dataset, .convert = convert, .keys = keys_tuple,
               .errors = errors, .mode = mode, .nfields = n};
  memcpy(cb->fields, fields, (size_t)n * sizeof *fields);
  pl_dataset *ds = NULL;
  pl_error err;
  pl_status s = pl_dataset_from_callback(fields, n, length, pycb_get_item, cb,
                                         pycb_free, &ds, &err);
  PyMem_Free(fields);
  if (s != PL_OK) {
    pycb_free(cb); /* still ours on failure */
    return raise_pl(&err);
  }
  return dataset_wrap(ds, cb);
}

/* describe(obj, convert) -> (dtype, shape): how a sample field is seen. */
static PyObject *mod_describe(PyObject *m, PyObject *args) {
  PyObject *obj, *convert = Py_None;
  if (!PyArg_ParseTuple(args, "O|O:describe", &obj, &convert))
    return NULL;
  fieldval v;
  PyObject *res = NULL;
  if (fieldval_get(obj, convert, &v) == 0) {
    PyObject *shape = shape_tuple(v.ndim, v.shape);
    res = shape ? Py_BuildValue("(sN)", pl_dtype_name(v.dtype), shape) : NULL;
  }
  fieldval_release(&v);
  return res;
}

/* ------------------------------------------------------------ batch holder */

typedef struct holder {
  atomic_long refs;
  atomic_uintptr_t stream; /* cudaStream_t the consumer last named */
  pl_batch *batch;
} holder;

static void holder_ref(holder *h) { atomic_fetch_add(&h->refs, 1); }

static void holder_unref(holder *h) {
  if (atomic_fetch_sub(&h->refs, 1) != 1)
    return;
  pl_batch_release(h->batch, (void *)atomic_load(&h->stream));
  free(h);
}

typedef struct {
  PyObject_HEAD
  holder *h;
} BatchObject;

typedef struct {
  PyObject_HEAD
  holder *h;
  int field;
  Py_ssize_t shape[PL_MAX_DIMS + 1];
  Py_ssize_t strides[PL_MAX_DIMS + 1];
} FieldArrayObject;

static void batch_dealloc(BatchObject *self) {
  holder_unref(self->h);
  PyObject_Free(self);
}

static PyObject *batch_size_get(BatchObject *self, void *unused) {
  return PyLong_FromUnsignedLong(pl_batch_size(self->h->batch));
}
static PyObject *batch_epoch_get(BatchObject *self, void *unused) {
  return PyLong_FromUnsignedLongLong(pl_batch_epoch(self->h->batch));
}
static PyObject *batch_index_get(BatchObject *self, void *unused) {
  return PyLong_FromUnsignedLongLong(pl_batch_index(self->h->batch));
}

static int batch_num_fields(const pl_batch *b) {
  int n = 0;
  while (pl_batch_field(b, n))
    n++;
  return n;
}

static PyObject *batch_num_fields_get(BatchObject *self, void *unused) {
  return PyLong_FromLong(batch_num_fields(self->h->batch));
}

static PyObject *batch_sample_indices(BatchObject *self, void *unused) {
  uint32_t n = pl_batch_size(self->h->batch);
  PyObject *list = PyList_New(n);
  for (uint32_t i = 0; list && i < n; i++) {
    PyObject *v =
        PyLong_FromUnsignedLongLong(pl_batch_sample_index(self->h->batch, i));
    if (!v) {
      Py_CLEAR(list);
      break;
    }
    PyList_SET_ITEM(list, i, v);
  }
  return list;
}

static PyObject *device_tuple(pl_device_kind kind, int index) {
  return Py_BuildValue("(si)", kind == PL_DEVICE_CUDA ? "cuda" : "cpu", index);
}

static PyObject *batch_device_get(BatchObject *self, void *unused) {
  int index;
  pl_device_kind k = pl_batch_device(self->h->batch, &index);
  return device_tuple(k, index);
}

/* field(i) -> FieldArray */
static PyObject *batch_field(BatchObject *self, PyObject *arg) {
  long i = PyLong_AsLong(arg);
  if (i == -1 && PyErr_Occurred())
    return NULL;
  const pl_field *f = pl_batch_field(self->h->batch, (int)i);
  if (!f)
    return PyErr_Format(PyExc_IndexError, "batch has no field %ld", i);
  FieldArrayObject *o = PyObject_New(FieldArrayObject, &FieldArrayType);
  if (!o)
    return NULL;
  holder_ref(self->h);
  o->h = self->h;
  o->field = (int)i;
  o->shape[0] = (Py_ssize_t)pl_batch_size(self->h->batch);
  for (int d = 0; d < f->ndim; d++)
    o->shape[d + 1] = (Py_ssize_t)f->shape[d];
  Py_ssize_t stride = (Py_ssize_t)pl_dtype_size(f->dtype);
  for (int d = f->ndim; d >= 0; d--) {
    o->strides[d] = stride;
    stride *= o->shape[d];
  }
  return (PyObject *)o;
}

/* release(stream=None): the stream (int) that last used the batch's device
 * memory, used when the last reference goes. */
static int parse_stream(PyObject *obj, uintptr_t *out, int *sync);

static PyObject *batch_record_stream(BatchObject *self, PyObject *arg) {
  uintptr_t s;
  int sync;
  if (parse_stream(arg, &s, &sync) < 0)
    return NULL;
  if (sync)
    atomic_store(&self->h->stream, s);
  Py_RETURN_NONE;
}

static PyMethodDef batch_methods[] = {
    {"field", (PyCFunction)batch_field, METH_O,
     "field(i) -> FieldArray exporting field i through DLPack"},
    {"record_stream", (PyCFunction)batch_record_stream, METH_O,
     "record_stream(stream): release the batch on this CUDA stream (an int "
     "cudaStream_t, 1 = legacy default)"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef batch_getset[] = {
    {"size", (getter)batch_size_get, NULL, "samples in the batch", NULL},
    {"epoch", (getter)batch_epoch_get, NULL, "epoch of the batch", NULL},
    {"index", (getter)batch_index_get, NULL, "batch index in the epoch", NULL},
    {"num_fields", (getter)batch_num_fields_get, NULL, "fields", NULL},
    {"sample_indices", (getter)batch_sample_indices, NULL,
     "dataset index of each sample", NULL},
    {"device", (getter)batch_device_get, NULL, "('cpu'|'cuda', index)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject BatchType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pinloader._pinloader.Batch",
    .tp_basicsize = sizeof(BatchObject),
    .tp_dealloc = (destructor)batch_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One batch; given back when it and every tensor made from it "
              "are gone.",
    .tp_methods = batch_methods,
    .tp_getset = batch_getset,
};

/* ------------------------------------------------------------ DLPack export */

typedef struct export_ctx {
  DLManagedTensor m;
  DLManagedTensorVersioned mv;
  holder *h;
  int64_t shape[PL_MAX_DIMS + 1];
  int64_t strides[PL_MAX_DIMS + 1];
} export_ctx;

static void export_free(export_ctx *c) {
  holder_unref(c->h);
  free(c);
}

static void dl_deleter(DLManagedTensor *self) {
  export_free(self->manager_ctx);
}

static void dl_deleter_versioned(DLManagedTensorVersioned *self) {
  export_free(self->manager_ctx);
}

/* A capsule nobody consumed still owns its tensor. */
static void capsule_destructor(PyObject *cap) {
  if (PyCapsule_IsValid(cap, "dltensor")) {
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    m->deleter(m);
  } else if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    DLManagedTensorVersioned *m =
        PyCapsule_GetPointer(cap, "dltensor_versioned");
    m->deleter(m);
  }
}

static DLDevice fa_dl_device(const FieldArrayObject *self) {
  int index;
  pl_device_kind k = pl_batch_device(self->h->batch, &index);
  DLDevice d = {k == PL_DEVICE_CUDA ? kDLCUDA : kDLCPU,
                k == PL_DEVICE_CUDA ? index : 0};
  return d;
}

static DLTensor fa_dl_tensor(FieldArrayObject *self, export_ctx *c) {
  const pl_field *f = pl_batch_field(self->h->batch, self->field);
  size_t item = pl_dtype_size(f->dtype);
  for (int d = 0; d <= f->ndim; d++) {
    c->shape[d] = (int64_t)self->shape[d];
    c->strides[d] = (int64_t)((size_t)self->strides[d] / item);
  }
  DLTensor t = {
      .data = pl_batch_data(self->h->batch, self->field),
      .device = fa_dl_device(self),
      .ndim = f->ndim + 1,
      .dtype = dl_dtype(f->dtype),
      .shape = c->shape,
      .strides = c->strides,
      .byte_offset = 0,
  };
  return t;
}

/* DLPack's CUDA stream argument: None or 1 = legacy default stream (NULL),
 * 2 = per-thread default, -1 = do not synchronize, > 2 = a cudaStream_t.
 * 0 is ambiguous and refused, as the array API standard says. */
static int parse_stream(PyObject *obj, uintptr_t *out, int *sync) {
  *out = 0;
  *sync = 1;
  if (obj == Py_None)
    return 0;
  int overflow;
  long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
  if (v == -1 && PyErr_Occurred())
    return -1;
  if (overflow > 0) {
    unsigned long long u = PyLong_AsUnsignedLongLong(obj);
    if (PyErr_Occurred())
      return -1;
    *out = (uintptr_t)u;
    return 0;
  }
  if (overflow < 0 || v < -1 || v == 0) {
    PyErr_SetString(PyExc_ValueError,
                    "stream must be None, -1, 1, 2 or a cudaStream_t "
                    "(0 is ambiguous)");
    return -1;
  }
  if (v == -1)
    *sync = 0;
  else if (v != 1)
    *out = (uintptr_t)v;
  return 0;
}

static int check_export_args(FieldArrayObject *self, PyObject *dl_device,
                             PyObject *copy) {
  if (copy == Py_True) {
    PyErr_SetString(PyExc_BufferError,
                    "pinloader exports batches without copying (copy=True)");
    return -1;
  }
  if (dl_device == Py_None)
    return 0;
  DLDevice d = fa_dl_device(self);
  int type, id;
  if (!PyArg_ParseTuple(dl_device, "ii:dl_device", &type, &id))
    return -1;
  if (type != (int)d.device_type || id != d.device_id) {
    PyErr_Format(PyExc_BufferError,
                 "the batch is on DLPack device (%d, %d), not (%d, %d)",
                 (int)d.device_type, d.device_id, type, id);
    return -1;
  }
  return 0;
}

static int wants_versioned(PyObject *max_version) {
  if (max_version == Py_None || !PyTuple_Check(max_version) ||
      PyTuple_GET_SIZE(max_version) < 1)
    return 0;
  long major = PyLong_AsLong(PyTuple_GET_ITEM(max_version, 0));
  if (major == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return 0;
  }
  return major >= 1;
}

/* Orders the consumer's stream after the batch's copy (CUDA batches). */
static int fa_sync_stream(FieldArrayObject *self, PyObject *stream) {
  uintptr_t s;
  int sync;
  if (parse_stream(stream, &s, &sync) < 0)
    return -1;
  if (fa_dl_device(self).device_type != kDLCUDA || !sync)
    return 0; /* host batches are complete when delivered */
  pl_error err;
  if (pl_batch_wait_stream(self->h->batch, (void *)s, &err) != PL_OK) {
    raise_pl(&err);
    return -1;
  }
  atomic_store(&self->h->stream, s);
  return 0;
}

static PyObject *fa_dlpack(FieldArrayObject *self, PyObject *args,
                           PyObject *kw) {
  static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
  PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None,
           *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOOO:__dlpack__", kwlist,
                                   &stream, &max_version, &dl_device, &copy))
    return NULL;
  if (check_export_args(self, dl_device, copy) < 0 ||
      fa_sync_stream(self, stream) < 0)
    return NULL;
  export_ctx *c = calloc(1, sizeof *c);
  if (!c)
    return PyErr_NoMemory();
  holder_ref(self->h);
  c->h = self->h;
  DLTensor t = fa_dl_tensor(self, c);
  PyObject *cap;
  if (wants_versioned(max_version)) {
    c->mv.version = (DLPackVersion){DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    c->mv.manager_ctx = c;
    c->mv.deleter = dl_deleter_versioned;
    c->mv.dl_tensor = t;
    cap = PyCapsule_New(&c->mv, "dltensor_versioned", capsule_destructor);
  } else {
    c->m.dl_tensor = t;
    c->m.manager_ctx = c;
    c->m.deleter = dl_deleter;
    cap = PyCapsule_New(&c->m, "dltensor", capsule_destructor);
  }
  if (!cap)
    export_free(c);
  return cap;
}

static PyObject *fa_dlpack_device(FieldArrayObject *self, PyObject *unused) {
  DLDevice d = fa_dl_device(self);
  return Py_BuildValue("(ii)", (int)d.device_type, d.device_id);
}

static void fa_dealloc(FieldArrayObject *self) {
  holder_unref(self->h);
  PyObject_Free(self);
}

static const pl_field *fa_field(const FieldArrayObject *self) {
  return pl_batch_field(self->h->batch, self->field);
}

static PyObject *fa_shape_get(FieldArrayObject *self, void *unused) {
  int64_t s[PL_MAX_DIMS + 1];
  int nd = fa_field(self)->ndim + 1;
  for (int d = 0; d < nd; d++)
    s[d] = self->shape[d];
  return shape_tuple(nd, s);
}

static PyObject *fa_dtype_get(FieldArrayObject *self, void *unused) {
  return PyUnicode_FromString(pl_dtype_name(fa_field(self)->dtype));
}

static PyObject *fa_name_get(FieldArrayObject *self, void *unused) {
  return PyUnicode_FromString(fa_field(self)->name);
}

static PyObject *fa_nbytes_get(FieldArrayObject *self, void *unused) {
  return PyLong_FromUnsignedLongLong(
      pl_batch_bytes(self->h->batch, self->field));
}

static PyObject *fa_device_get(FieldArrayObject *self, void *unused) {
  int index;
  pl_device_kind k = pl_batch_device(self->h->batch, &index);
  return device_tuple(k, index);
}

/* tobytes(): the field's bytes, read back from the device if needed. */
static PyObject *fa_tobytes(FieldArrayObject *self, PyObject *unused) {
  uint64_t n = pl_batch_bytes(self->h->batch, self->field);
  PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
  if (!b)
    return NULL;
  pl_error err;
  pl_status s;
  char *dst = PyBytes_AS_STRING(b);
  Py_BEGIN_ALLOW_THREADS
  s = pl_batch_copy_to_host(self->h->batch, self->field, 0, dst, n, &err);
  Py_END_ALLOW_THREADS
  if (s != PL_OK) {
    Py_DECREF(b);
    return raise_pl(&err);
  }
  return b;
}

static int fa_getbuffer(FieldArrayObject *self, Py_buffer *view, int flags) {
  if (fa_dl_device(self).device_type != kDLCPU) {
    PyErr_SetString(PyExc_BufferError,
                    "a CUDA batch has no host buffer: use __dlpack__");
    view->obj = NULL;
    return -1;
  }
  const pl_field *f = fa_field(self);
  view->buf = pl_batch_data(self->h->batch, self->field);
  view->obj = (PyObject *)self;
  Py_INCREF(self);
  view->len = (Py_ssize_t)pl_batch_bytes(self->h->batch, self->field);
  view->readonly = 0;
  view->itemsize = (Py_ssize_t)pl_dtype_size(f->dtype);
  view->format = (flags & PyBUF_FORMAT) ? (char *)format_of(f->dtype) : NULL;
  view->ndim = f->ndim + 1;
  view->shape = (flags & PyBUF_ND) ? self->shape : NULL;
  view->strides = (flags & PyBUF_STRIDES) ? self->strides : NULL;
  view->suboffsets = NULL;
  view->internal = NULL;
  return 0;
}

static PyBufferProcs fa_as_buffer = {
    .bf_getbuffer = (getbufferproc)fa_getbuffer,
};

static PyMethodDef fa_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))fa_dlpack,
     METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(stream=None, max_version=None, dl_device=None, copy=None): "
     "a DLPack capsule sharing the batch's memory"},
    {"__dlpack_device__", (PyCFunction)fa_dlpack_device, METH_NOARGS,
     "(DLDeviceType, device id)"},
    {"tobytes", (PyCFunction)fa_tobytes, METH_NOARGS,
     "the field's bytes (read back from the GPU for CUDA batches)"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef fa_getset[] = {
    {"shape", (getter)fa_shape_get, NULL, "(batch, *field shape)", NULL},
    {"dtype", (getter)fa_dtype_get, NULL, "element type name", NULL},
    {"name", (getter)fa_name_get, NULL, "field name", NULL},
    {"nbytes", (getter)fa_nbytes_get, NULL, "bytes", NULL},
    {"device", (getter)fa_device_get, NULL, "('cpu'|'cuda', index)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject FieldArrayType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pinloader._pinloader.FieldArray",
    .tp_basicsize = sizeof(FieldArrayObject),
    .tp_dealloc = (destructor)fa_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One field of a batch, exported without copying through DLPack "
              "or (host batches) the buffer protocol.",
    .tp_methods = fa_methods,
    .tp_getset = fa_getset,
    .tp_as_buffer = &fa_as_buffer,
};

/* ------------------------------------------------------------ Loader */

typedef struct {
  PyObject_HEAD
  pl_loader *ld;
  DatasetObject *dso;
  int busy; /* a call is waiting with the GIL released */
  pl_loader_config cfg; /* as created: .options */
} LoaderObject;

/* ------------------------------------------------------------ log hook */

/* logging.getLogger("pinloader"): where the library's log goes. Set at
 * import, kept for the module's life. */
static PyObject *py_logger;

/* The log hook: called from the consumer's thread (with or without the
 * GIL) and from C worker threads. It takes the GIL only where this thread
 * does not hold it already, and drops the message once the interpreter is
 * finalizing (taking the GIL then would hang or kill the thread). */
static void py_log(void *user, pl_log_level level, const char *msg) {
  static const int levels[] = {10, 20, 30, 40}; /* logging.DEBUG ... ERROR */
  (void)user;
  if (!py_logger || py_finalizing())
    return;
  int held = PyGILState_Check();
  PyGILState_STATE st = held ? PyGILState_LOCKED : PyGILState_Ensure();
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb); /* the message must not disturb a pending error */
  int lv = (unsigned)level < 4 ? levels[level] : 40;
  PyObject *r = PyObject_CallMethod(py_logger, "log", "is", lv, msg);
  if (!r)
    PyErr_WriteUnraisable(py_logger);
  Py_XDECREF(r);
  PyErr_Restore(t, v, tb);
  if (!held)
    PyGILState_Release(st);
}

/* ------------------------------------------------------------ options */

static PyObject *option_value_error(const pl_option_info *o, const char *kind,
                                    PyObject *val) {
  if (o->type == PL_OPT_REAL)
    return PyErr_Format(PyExc_ValueError, "%s must be %s in [%g, %g], got %R",
                        o->name, kind, o->min_real, o->max_real, val);
  return PyErr_Format(PyExc_ValueError, "%s must be %s in [%llu, %llu], got %R",
                      o->name, kind, (unsigned long long)o->min,
                      (unsigned long long)o->max, val);
}

/* A keyword argument's value as the text pl_loader_config_set reads (new
 * reference), or NULL with ValueError. Integers must be ints (not floats,
 * not bools: torch refuses batch_size=2.7 and batch_size=True); the range is
 * checked in C. */
static PyObject *option_text(const pl_option_info *o, PyObject *val) {
  switch (o->type) {
  case PL_OPT_BOOL: {
    int t = PyObject_IsTrue(val);
    return t < 0 ? NULL : PyUnicode_FromString(t ? "1" : "0");
  }
  case PL_OPT_REAL: {
    if (PyBool_Check(val) || !(PyLong_Check(val) || PyFloat_Check(val)))
      return option_value_error(o, "a number", val);
    double d = PyFloat_AsDouble(val);
    if (d == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return option_value_error(o, "a number", val);
    }
    char *repr = PyOS_double_to_string(d, 'r', 0, 0, NULL);
    PyObject *t = repr ? PyUnicode_FromString(repr) : PyErr_NoMemory();
    PyMem_Free(repr);
    return t;
  }
  case PL_OPT_DEVICE:
  case PL_OPT_LOG_LEVEL:
    if (!PyUnicode_Check(val))
      return PyErr_Format(PyExc_ValueError, "%s must be one of %s, got %R",
                          o->name, o->values, val);
    Py_INCREF(val);
    return val;
  default:
    if (o->type == PL_OPT_AUTO_INT && PyUnicode_Check(val) &&
        PyUnicode_CompareWithASCIIString(val, "auto") == 0)
      return PyUnicode_FromString("auto");
    if (PyBool_Check(val) || !PyLong_Check(val))
      return option_value_error(o, "an integer", val);
    return PyObject_Str(val);
  }
}

/* Which of the sharding fields the caller named (pl_loader_config_shard_env). */
static unsigned option_keep(const char *name, const char *text) {
  if (!strcmp(name, "rank"))
    return PL_KEEP_RANK;
  if (!strcmp(name, "world_size"))
    return PL_KEEP_WORLD_SIZE;
  if (!strcmp(name, "device_index") ||
      (!strcmp(name, "device") && strchr(text, ':')))
    return PL_KEEP_DEVICE_INDEX;
  return 0;
}

/* cfg.<key> = val through the option table; None means not given. */
static int option_set(pl_loader_config *cfg, PyObject *key, PyObject *val,
                      unsigned *keep) {
  const char *name = PyUnicode_AsUTF8(key);
  if (!name)
    return -1;
  int i = pl_option_find(name);
  if (i < 0) {
    PyErr_Format(PyExc_TypeError,
                 "Loader() got an unexpected keyword argument '%s'", name);
    return -1;
  }
  if (val == Py_None)
    return 0;
  PyObject *text = option_text(pl_option_info_at(i), val);
  const char *ctext = text ? PyUnicode_AsUTF8(text) : NULL;
  if (!ctext) {
    Py_XDECREF(text);
    return -1;
  }
  pl_error err;
  int rc = pl_loader_config_set(cfg, name, ctext, &err) == PL_OK ? 0 : -1;
  if (rc < 0)
    PyErr_SetString(PyExc_ValueError, err.message);
  else
    *keep |= option_keep(name, ctext);
  Py_DECREF(text);
  return rc;
}

/* Loader(dataset, **options): options are exactly the table's names
 * (pl_option_info_at); sharding the caller leaves out comes from the
 * environment (pl_loader_config_shard_env's rule). */
static int loader_config(PyObject *args, PyObject *kw, DatasetObject **dso,
                         pl_loader_config *cfg) {
  if (!PyArg_ParseTuple(args, "O!:Loader", &DatasetType, dso))
    return -1;
  pl_loader_config_init(cfg);
  cfg->log = py_log;
  unsigned keep = 0;
  PyObject *key, *val;
  Py_ssize_t pos = 0;
  while (kw && PyDict_Next(kw, &pos, &key, &val))
    if (option_set(cfg, key, val, &keep) < 0)
      return -1;
  pl_error err;
  if (pl_loader_config_shard_env(cfg, keep, &err) != PL_OK) {
    PyErr_SetString(PyExc_ValueError, err.message);
    return -1;
  }
  return 0;
}

/* The option's value as Python has it: bool, int, float or str. */
static PyObject *option_pyvalue(const pl_option_info *o, const char *text) {
  switch (o->type) {
  case PL_OPT_BOOL:
    return PyBool_FromLong(strcmp(text, "0") != 0);
  case PL_OPT_REAL:
    return PyFloat_FromDouble(PyOS_string_to_double(text, NULL, NULL));
  case PL_OPT_DEVICE:
  case PL_OPT_LOG_LEVEL:
    return PyUnicode_FromString(text);
  default:
    if (!strcmp(text, "auto")) /* PL_OPT_AUTO_INT */
      return PyUnicode_FromString(text);
    return PyLong_FromString(text, NULL, 10);
  }
}

/* {name: value} of a config, through pl_loader_config_get. */
static PyObject *config_dict(const pl_loader_config *cfg) {
  PyObject *d = PyDict_New();
  for (int i = 0; d && i < pl_option_count(); i++) {
    const pl_option_info *o = pl_option_info_at(i);
    char text[64];
    pl_error err;
    if (pl_loader_config_get(cfg, o->name, text, sizeof text, &err) != PL_OK) {
      Py_DECREF(d);
      return raise_pl(&err);
    }
    PyObject *v = option_pyvalue(o, text);
    if (!v || PyDict_SetItemString(d, o->name, v) < 0)
      Py_CLEAR(d);
    Py_XDECREF(v);
  }
  return d;
}

static const char *option_type_name(pl_option_type t) {
  static const char *const names[] = {"bool", "int",  "u32",    "u64",
                                      "bytes", "real", "device", "log_level"};
  return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

/* One option as a dict: name, type, default, min, max, doc, values. */
static PyObject *option_dict(const pl_option_info *o, PyObject *defaults) {
  PyObject *def = PyDict_GetItemString(defaults, o->name); /* borrowed */
  PyObject *lo = o->type == PL_OPT_REAL
                     ? PyFloat_FromDouble(o->min_real)
                     : PyLong_FromUnsignedLongLong(o->min);
  PyObject *hi = o->type == PL_OPT_REAL
                     ? PyFloat_FromDouble(o->max_real)
                     : PyLong_FromUnsignedLongLong(o->max);
  PyObject *d = lo && hi && def
                    ? Py_BuildValue("{s:s,s:s,s:O,s:O,s:O,s:s,s:z}", "name",
                                    o->name, "type", option_type_name(o->type),
                                    "default", def, "min", lo, "max", hi,
                                    "doc", o->doc, "values", o->values)
                    : NULL;
  Py_XDECREF(lo);
  Py_XDECREF(hi);
  return d;
}

/* loader_options() -> [ {name, type, default, min, max, doc, values} ]: the
 * C option table, in its order. */
static PyObject *mod_loader_options(PyObject *m, PyObject *unused) {
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  PyObject *defaults = config_dict(&cfg);
  PyObject *list = defaults ? PyList_New(pl_option_count()) : NULL;
  for (int i = 0; list && i < pl_option_count(); i++) {
    PyObject *d = option_dict(pl_option_info_at(i), defaults);
    if (!d)
      Py_CLEAR(list);
    else
      PyList_SET_ITEM(list, i, d);
  }
  Py_XDECREF(defaults);
  return list;
}

static PyObject *loader_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  DatasetObject *dso;
  pl_loader_config cfg;
  if (loader_config(args, kw, &dso, &cfg) < 0)
    return NULL;
  pl_loader *ld = NULL;
  pl_error err;
  pl_status s;
  Py_BEGIN_ALLOW_THREADS
  s = pl_loader_create(dso->ds, &cfg, &ld, &err);
  Py_END_ALLOW_THREADS
  if (s != PL_OK)
    return raise_pl(&err);
  LoaderObject *self = (LoaderObject *)type->tp_alloc(type, 0);
  if (!self) {
    Py_BEGIN_ALLOW_THREADS
    pl_loader_destroy(ld);
    Py_END_ALLOW_THREADS
    return NULL;
  }
  self->ld = ld;
  self->cfg = cfg;
  Py_INCREF(dso);
  self->dso = dso;
  return (PyObject *)self;
}

static void *destroy_thread(void *ld) {
  pl_loader_destroy(ld);
  return NULL;
}

static void loader_destroy(LoaderObject *self) {
  pl_loader *ld = self->ld;
  self->ld = NULL;
  if (!ld)
    return;
  if (in_getitem) {
    /* Inside a worker's __getitem__ (the GC collected the loader there):
     * joining this very worker would free the dataset under it. A thread of
     * its own destroys the loader once the worker is out of __getitem__. */
    pthread_t t;
    if (pthread_create(&t, NULL, destroy_thread, ld) == 0)
      pthread_detach(t);
    return; /* else leak it: better than a use after free */
  }
  /* Workers may be waiting for the GIL inside __getitem__. */
  Py_BEGIN_ALLOW_THREADS
  pl_loader_destroy(ld);
  Py_END_ALLOW_THREADS
}

static void loader_dealloc(LoaderObject *self) {
  loader_destroy(self);
  Py_CLEAR(self->dso);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Guards a call that releases the GIL: one consumer thread at a time. */
static int loader_enter(LoaderObject *self) {
  if (!self->ld) {
    raise_status(PL_CLOSED, "the loader is closed");
    return -1;
  }
  if (self->busy) {
    PyErr_SetString(PyExc_RuntimeError,
                    "the loader is in use by another thread: drive one "
                    "loader from one thread at a time");
    return -1;
  }
  self->busy = 1;
  return 0;
}

static PyObject *loader_close(LoaderObject *self, PyObject *unused) {
  if (self->busy) {
    PyErr_SetString(PyExc_RuntimeError,
                    "cannot close a loader while another thread waits on it");
    return NULL;
  }
  loader_destroy(self);
  Py_RETURN_NONE;
}

/* The stored exception of the failed sample named in err, re-raised with a
 * note naming the sample index. */
static PyObject *raise_callback(pycb *cb, const pl_error *err) {
  if (!cb || err->sample_index == UINT64_MAX)
    return raise_pl(err);
  unsigned long long index = err->sample_index;
  PyObject *key = PyLong_FromUnsignedLongLong(index);
  PyObject *exc = key ? PyDict_GetItemWithError(cb->errors, key) : NULL;
  Py_XINCREF(exc);
  Py_XDECREF(key);
  PyDict_Clear(cb->errors); /* older failures of the abandoned epoch */
  if (!exc)
    return PyErr_Occurred() ? NULL : raise_pl(err);
  PyObject *note = PyUnicode_FromFormat(
      "pinloader: raised by dataset[%llu] (%s)", index, err->message);
  PyObject *r = note ? PyObject_CallMethod(exc, "add_note", "O", note) : NULL;
  Py_XDECREF(note);
  if (!r) {
    /* Before Python 3.11: chain it under a pinloader.Error instead. */
    PyErr_Clear();
    raise_pl(err);
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    PyException_SetCause(v, exc);
    PyErr_Restore(t, v, tb);
    return NULL;
  }
  Py_DECREF(r);
  PyObject *type = (PyObject *)Py_TYPE(exc);
  Py_INCREF(type);
  PyErr_Restore(type, exc, PyException_GetTraceback(exc)); /* steals all */
  return NULL;
}

static PyObject *raise_next(LoaderObject *self, const pl_error *err) {
  if (err->status == PL_CALLBACK)
    return raise_callback(self->dso->cb, err);
  if (err->status != PL_EXHAUSTED)
    return raise_pl(err);
  /* The C message in Python's words (tensors, not pl_batch_release). */
  pl_loader_stats st;
  pl_loader_stats_get(self->ld, &st);
  char msg[256];
  snprintf(msg, sizeof msg,
           "all %llu batch buffers are held by tensors of earlier batches: "
           "release some (drop the tensors, or .clone() what you keep) or "
           "raise DataLoader(max_batch_buffers=...)",
           (unsigned long long)st.batch_buffers);
  return raise_status(PL_EXHAUSTED, msg);
}

static PyObject *batch_wrap(pl_batch *b) {
  holder *h = malloc(sizeof *h);
  BatchObject *o = h ? PyObject_New(BatchObject, &BatchType) : NULL;
  if (!o) {
    free(h);
    pl_batch_release(b, NULL);
    return PyErr_Occurred() ? NULL : PyErr_NoMemory();
  }
  atomic_init(&h->refs, 1);
  atomic_init(&h->stream, 0);
  h->batch = b;
  o->h = h;
  return (PyObject *)o;
}

/* next() -> Batch, or None at the end of an epoch. Waits with the GIL
 * released, in slices, so that Ctrl-C interrupts it. */
static PyObject *loader_next(LoaderObject *self, PyObject *unused) {
  if (loader_enter(self) < 0)
    return NULL;
  pl_batch *b = NULL;
  pl_error err;
  pl_status s;
  for (;;) {
    Py_BEGIN_ALLOW_THREADS
    s = pl_loader_next_timed(self->ld, WAIT_SLICE_S, &b, &err);
    Py_END_ALLOW_THREADS
    if (s != PL_NOT_READY)
      break;
    if (PyErr_CheckSignals() < 0) {
      self->busy = 0;
      return NULL;
    }
  }
  self->busy = 0;
  if (s == PL_END_OF_EPOCH)
    Py_RETURN_NONE;
  if (s != PL_OK)
    return raise_next(self, &err);
  return batch_wrap(b);
}

static PyObject *loader_set_epoch(LoaderObject *self, PyObject *arg) {
  unsigned long long e = PyLong_AsUnsignedLongLong(arg);
  if ((e == (unsigned long long)-1 && PyErr_Occurred()) ||
      loader_enter(self) < 0)
    return NULL;
  pl_error err;
  pl_status s;
  Py_BEGIN_ALLOW_THREADS
  s = pl_loader_set_epoch(self->ld, e, &err);
  Py_END_ALLOW_THREADS
  self->busy = 0;
  if (s != PL_OK)
    return raise_pl(&err);
  Py_RETURN_NONE;
}

static PyObject *loader_save_state(LoaderObject *self, PyObject *unused) {
  if (loader_enter(self) < 0)
    return NULL;
  self->busy = 0;
  size_t len = 0;
  pl_error err;
  if (pl_loader_save_state(self->ld, NULL, &len, &err) != PL_OK)
    return raise_pl(&err);
  PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)len);
  if (b && pl_loader_save_state(self->ld, PyBytes_AS_STRING(b), &len, &err) !=
               PL_OK) {
    Py_DECREF(b);
    return raise_pl(&err);
  }
  if (b && (Py_ssize_t)len != PyBytes_GET_SIZE(b))
    _PyBytes_Resize(&b, (Py_ssize_t)len);
  return b;
}

static PyObject *loader_load_state(LoaderObject *self, PyObject *arg) {
  Py_buffer view;
  if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
    return NULL;
  if (loader_enter(self) < 0) {
    PyBuffer_Release(&view);
    return NULL;
  }
  pl_error err;
  pl_status s;
  Py_BEGIN_ALLOW_THREADS
  s = pl_loader_load_state(self->ld, view.buf, (size_t)view.len, &err);
  Py_END_ALLOW_THREADS
  self->busy = 0;
  PyBuffer_Release(&view);
  if (s != PL_OK)
    return raise_pl(&err);
  Py_RETURN_NONE;
}

static PyObject *loader_stats(LoaderObject *self, PyObject *unused) {
  if (!self->ld)
    return raise_status(PL_CLOSED, "the loader is closed");
  pl_loader_stats st;
  pl_loader_stats_get(self->ld, &st);
  return Py_BuildValue(
      "{sKsKsKsKsKsKsKsKsdsdsdsK}", "batches_delivered", st.batches_delivered,
      "samples_delivered", st.samples_delivered, "bytes_delivered",
      st.bytes_delivered, "batches_copied", st.batches_copied, "bytes_copied",
      st.bytes_copied, "pinned_bytes", st.pinned_bytes, "pinned_fallbacks",
      st.pinned_fallbacks, "batch_buffers", st.batch_buffers,
      "consumer_wait_s", st.consumer_wait_s, "worker_busy_s",
      st.worker_busy_s, "copy_s", st.copy_s, "batches_direct",
      st.batches_direct);
}

/* report(json=False) -> str (pl_loader_report). Computed without the GIL:
 * it waits on the loader's lock, which a worker may hold. */
static PyObject *loader_report(LoaderObject *self, PyObject *args,
                               PyObject *kw) {
  static char *kwlist[] = {"json", NULL};
  int json = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|p:report", kwlist, &json))
    return NULL;
  if (!self->ld)
    return raise_status(PL_CLOSED, "the loader is closed");
  pl_error err;
  pl_status s;
  size_t len = 0;
  char *buf = NULL;
  int flags = json ? PL_REPORT_JSON : 0;
  Py_BEGIN_ALLOW_THREADS
  s = pl_loader_report(self->ld, NULL, &len, flags, &err);
  for (int tries = 0; s == PL_OK && tries < 8; tries++) {
    size_t cap = len + 256; /* the numbers may still move */
    free(buf);
    if (!(buf = malloc(cap))) {
      s = err.status = PL_NO_MEMORY;
      snprintf(err.message, sizeof err.message, "out of memory");
      break;
    }
    len = cap;
    if ((s = pl_loader_report(self->ld, buf, &len, flags, &err)) == PL_OK ||
        len < cap)
      break;
    s = PL_OK; /* too small: again, larger */
  }
  Py_END_ALLOW_THREADS
  PyObject *out = s == PL_OK ? PyUnicode_FromString(buf) : raise_pl(&err);
  free(buf);
  return out;
}

static int loader_open(LoaderObject *self) {
  if (self->ld)
    return 0;
  raise_status(PL_CLOSED, "the loader is closed");
  return -1;
}

static PyObject *loader_num_batches(LoaderObject *self, void *unused) {
  return loader_open(self) < 0
             ? NULL
             : PyLong_FromUnsignedLongLong(pl_loader_num_batches(self->ld));
}

static PyObject *loader_num_samples(LoaderObject *self, void *unused) {
  return loader_open(self) < 0
             ? NULL
             : PyLong_FromUnsignedLongLong(pl_loader_num_samples(self->ld));
}

static PyObject *loader_epoch(LoaderObject *self, void *unused) {
  return loader_open(self) < 0
             ? NULL
             : PyLong_FromUnsignedLongLong(pl_loader_epoch(self->ld));
}

static PyObject *loader_device(LoaderObject *self, void *unused) {
  if (loader_open(self) < 0)
    return NULL;
  int index;
  pl_device_kind k = pl_loader_device(self->ld, &index);
  return Py_BuildValue("(sis)", k == PL_DEVICE_CUDA ? "cuda" : "cpu", index,
                       pl_loader_device_name(self->ld));
}

static PyObject *loader_options(LoaderObject *self, void *unused) {
  return config_dict(&self->cfg);
}

static PyObject *loader_closed(LoaderObject *self, void *unused) {
  return PyBool_FromLong(self->ld == NULL);
}

static PyMethodDef loader_methods[] = {
    {"next", (PyCFunction)loader_next, METH_NOARGS,
     "next() -> Batch, or None at the end of an epoch"},
    {"set_epoch", (PyCFunction)loader_set_epoch, METH_O,
     "set_epoch(e): abandon the current epoch; the next batch begins e"},
    {"save_state", (PyCFunction)loader_save_state, METH_NOARGS,
     "save_state() -> bytes (pl_loader_save_state)"},
    {"load_state", (PyCFunction)loader_load_state, METH_O,
     "load_state(bytes) (pl_loader_load_state)"},
    {"stats", (PyCFunction)loader_stats, METH_NOARGS, "stats() -> dict"},
    {"report", (PyCFunction)(void (*)(void))loader_report,
     METH_VARARGS | METH_KEYWORDS,
     "report(json=False) -> str: the bottleneck report (pl_loader_report)"},
    {"close", (PyCFunction)loader_close, METH_NOARGS,
     "stop the workers; batches still held stay valid"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef loader_getset[] = {
    {"num_batches", (getter)loader_num_batches, NULL, "batches per epoch",
     NULL},
    {"num_samples", (getter)loader_num_samples, NULL, "samples per epoch",
     NULL},
    {"epoch", (getter)loader_epoch, NULL, "epoch of the next batch", NULL},
    {"device", (getter)loader_device, NULL, "(kind, index, name)", NULL},
    {"closed", (getter)loader_closed, NULL, "closed", NULL},
    {"options", (getter)loader_options, NULL,
     "{option: value} the loader was created with (after the environment's "
     "sharding)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject LoaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pinloader._pinloader.Loader",
    .tp_basicsize = sizeof(LoaderObject),
    .tp_dealloc = (destructor)loader_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Loader(dataset, **options): a pl_loader. The options are "
              "the C option table's (loader_options()), range-checked in C; "
              "None means not given. Sharding not given comes from "
              "RANK / WORLD_SIZE / LOCAL_RANK (pl_loader_config_shard_env).",
    .tp_methods = loader_methods,
    .tp_getset = loader_getset,
    .tp_new = loader_new,
};

/* ------------------------------------------------------------ module */

static PyObject *mod_dtype_names(PyObject *m, PyObject *unused) {
  PyObject *list = PyList_New(PL_DTYPE_COUNT_);
  for (int t = 0; list && t < PL_DTYPE_COUNT_; t++) {
    PyObject *s = PyUnicode_FromString(pl_dtype_name((pl_dtype)t));
    if (!s) {
      Py_CLEAR(list);
      break;
    }
    PyList_SET_ITEM(list, t, s);
  }
  return list;
}

static PyObject *mod_cuda_available(PyObject *m, PyObject *unused) {
  return PyBool_FromLong(pl_cuda_available() && pl_cuda_device_count() > 0);
}

static PyObject *mod_cuda_device_count(PyObject *m, PyObject *unused) {
  return PyLong_FromLong(pl_cuda_device_count());
}

static PyObject *mod_version(PyObject *m, PyObject *unused) {
  return PyUnicode_FromString(pl_version_string());
}

static PyMethodDef module_methods[] = {
    {"open_idx", mod_open_idx, METH_VARARGS, "open_idx(images, labels)"},
    {"open_cifar10", mod_open_cifar10, METH_O, "open_cifar10([paths])"},
    {"open", mod_open, METH_VARARGS, "open(kind, [paths], options)"},
    {"replaced", mod_replaced, METH_O, "replaced(dataset) -> int"},
    {"open_records", (PyCFunction)(void (*)(void))mod_open_records,
     METH_VARARGS | METH_KEYWORDS,
     "open_records(paths, header_bytes, record_bytes, fields)"},
    {"to_float32", mod_to_float32, METH_VARARGS,
     "to_float32(dataset, field, scale)"},
    {"from_callback", mod_from_callback, METH_VARARGS,
     "from_callback(dataset, length, fields, mode, keys, convert)"},
    {"describe", mod_describe, METH_VARARGS,
     "describe(obj, convert=None) -> (dtype, shape)"},
    {"dtype_names", mod_dtype_names, METH_NOARGS, "the dtype names"},
    {"loader_options", mod_loader_options, METH_NOARGS,
     "loader_options() -> [{name, type, default, min, max, doc, values}]: "
     "the C option table"},
    {"cuda_available", mod_cuda_available, METH_NOARGS,
     "CUDA backend built and a device usable"},
    {"cuda_device_count", mod_cuda_device_count, METH_NOARGS, "devices"},
    {"version", mod_version, METH_NOARGS, "the C library's version"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_pinloader",
    "The C binding of pinloader (include/pinloader.h).", -1, module_methods,
    NULL, NULL, NULL, NULL};

static int add_type(PyObject *m, PyTypeObject *t, const char *name) {
  if (PyType_Ready(t) < 0)
    return -1;
  Py_INCREF(t);
  if (PyModule_AddObject(m, name, (PyObject *)t) < 0) {
    Py_DECREF(t);
    return -1;
  }
  return 0;
}

static int add_status_names(PyObject *m) {
  PyObject *d = PyDict_New();
  for (int s = 0; d && s < PL_STATUS_COUNT_; s++) {
    PyObject *v = PyLong_FromLong(s);
    int rc = v ? PyDict_SetItemString(d, pl_status_name((pl_status)s), v) : -1;
    Py_XDECREF(v);
    if (rc < 0)
      Py_CLEAR(d);
  }
  if (!d || PyModule_AddObject(m, "STATUS", d) < 0) {
    Py_XDECREF(d);
    return -1;
  }
  return 0;
}

PyMODINIT_FUNC PyInit__pinloader(void); /* the one exported symbol */

PyMODINIT_FUNC PyInit__pinloader(void) {
  PyObject *m = PyModule_Create(&module_def);
  if (!m)
    return NULL;
  Error = PyErr_NewExceptionWithDoc(
      "pinloader.Error",
      "An error from the pinloader library. .status is the status name "
      "('PL_FORMAT', ...), .code its number; the message names the cause.",
      PyExc_RuntimeError, NULL);
  if (!Error)
    goto fail;
  Py_INCREF(Error);
  if (PyModule_AddObject(m, "Error", Error) < 0) {
    Py_DECREF(Error);
    goto fail;
  }
  PyObject *logging = PyImport_ImportModule("logging");
  py_logger = logging ? PyObject_CallMethod(logging, "getLogger", "s",
                                            "pinloader")
                      : NULL;
  Py_XDECREF(logging);
  if (!py_logger)
    goto fail;
  if (add_type(m, &DatasetType, "Dataset") < 0 ||
      add_type(m, &LoaderType, "Loader") < 0 ||
      add_type(m, &BatchType, "Batch") < 0 ||
      add_type(m, &FieldArrayType, "FieldArray") < 0 || add_status_names(m) < 0)
    goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
