/*
 * pinloader._pinloader: the CPython binding of include/pinloader.h.
 *
 * This file is the module and its errors; the types live in files of their
 * own (module.h says which): datasets.c (Dataset, the Python per-sample
 * callback), batches.c (Batch, FieldArray, DLPack), loader.c (Loader, the
 * option table, the log hook), iter.c (LoaderIter, explicit orders),
 * workers.c (worker processes: ProcSet and the batch callback).
 *
 * Objects:
 *   Dataset     owns a pl_dataset (native files, a Python map-style dataset
 *               read through pl_dataset_from_callback, or one filled a batch
 *               at a time by worker processes).
 *   Loader      owns a pl_loader; next() returns a Batch or None at the end
 *               of an epoch.
 *   Batch       a Python handle on a batch holder (batches.c).
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
#include "dlpack.h"
#include "module.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

PyObject *Error; /* pinloader.Error(RuntimeError) */
/* Nonzero while this thread runs a Python dataset's __getitem__ for a
 * loader: a loader freed then (the GC ran inside __getitem__) may be the one
 * whose worker this is, so it must not be joined from here. */
_Thread_local int in_getitem;
_Thread_local PyObject **consumer_interrupt;

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

PyObject *raise_status(pl_status s, const char *message) {
  return raise_error(s, message, NULL);
}

PyObject *raise_pl(const pl_error *err) {
  return raise_error(err->status, err->message, err);
}

/* ------------------------------------------------------------ dtypes */

int dtype_from_name(const char *name, pl_dtype *out) {
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
int dtype_from_format(const char *fmt, Py_ssize_t itemsize,
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

const char *format_of(pl_dtype t) {
  static const char f[PL_DTYPE_COUNT_][2] = {
#define PL_DTYPE_FORMAT_(NAME, name, bytes, format, dlpack) \
  [PL_##NAME] = {format, 0},
      PL_DTYPE_MAP(PL_DTYPE_FORMAT_)
#undef PL_DTYPE_FORMAT_
  };
  return ((unsigned)t < PL_DTYPE_COUNT_) ? f[t] : "B";
}

DLDataType dl_dtype(pl_dtype t) {
  static const uint8_t codes[PL_DTYPE_COUNT_] = {
#define PL_DTYPE_DLPACK_(NAME, name, bytes, format, dlpack) [PL_##NAME] = dlpack,
      PL_DTYPE_MAP(PL_DTYPE_DLPACK_)
#undef PL_DTYPE_DLPACK_
  };
  DLDataType d = {(unsigned)t < PL_DTYPE_COUNT_ ? codes[t] : kDLUInt,
                  (uint8_t)(pl_dtype_size(t) * 8), 1};
  return d;
}

PyObject *shape_tuple(int ndim, const int64_t *shape) {
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
void describe_c(pl_dtype t, int ndim, const int64_t *shape, char *buf,
                       size_t n) {
  size_t k = (size_t)snprintf(buf, n, "%s (", pl_dtype_name(t));
  for (int i = 0; i < ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "",
                          (long long)shape[i]);
  if (k < n)
    snprintf(buf + k, n - k, "%s)", ndim == 1 ? "," : "");
}

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

/* The source registry (pl_source_at): one dict per source, with its kind,
 * usage line, option keys (a tuple) and a line saying what it reads. */
static PyObject *mod_sources(PyObject *m, PyObject *unused) {
  PyObject *list = PyList_New(0);
  const pl_source_info *s;
  for (int i = 0; list && (s = pl_source_at(i)); i++) {
    PyObject *keys = PyUnicode_FromString(s->keys), *split = NULL;
    if (keys)
      split = PyObject_CallMethod(keys, "split", NULL);
    PyObject *row = split ? Py_BuildValue("{s:s,s:s,s:N,s:s}", "kind",
                                          s->kind, "usage", s->usage,
                                          "keys", PySequence_Tuple(split),
                                          "doc", s->doc)
                          : NULL;
    Py_XDECREF(keys);
    Py_XDECREF(split);
    if (!row || PyList_Append(list, row) < 0)
      Py_CLEAR(list);
    Py_XDECREF(row);
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
    {"dtype_names", mod_dtype_names, METH_NOARGS, "the dtype names"},
    {"sources", mod_sources, METH_NOARGS,
     "the source registry: a dict per source (kind, usage, keys, doc)"},
    {"cuda_available", mod_cuda_available, METH_NOARGS,
     "CUDA backend built and a device usable"},
    {"cuda_device_count", mod_cuda_device_count, METH_NOARGS, "devices"},
    {"version", mod_version, METH_NOARGS, "the C library's version"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_pinloader",
    "The C binding of pinloader (include/pinloader.h).", -1, module_methods,
    NULL, NULL, NULL, NULL};

int pl_py_add_type(PyObject *m, PyTypeObject *t, const char *name) {
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
  if (add_status_names(m) < 0)
    goto fail;
  /* The parts, each in a file of its own (module.h). */
  if (pl_py_init_datasets(m) < 0 || pl_py_init_batches(m) < 0 ||
      pl_py_init_loader(m) < 0 || pl_py_init_iter(m) < 0 ||
      pl_py_init_workers(m) < 0 || pl_py_init_samples(m) < 0)
    goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}

