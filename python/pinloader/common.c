/* What every file of the extension shares, calling none of them (the
 * tree's leaf, with fields.c): pinloader.Error and the pl_error fields it
 * carries, the thread-local flags of reads in progress, shapes as tuples,
 * and adding a type to the module. */
#include "module.h"

#include <stdio.h>

PyObject *Error; /* pinloader.Error(RuntimeError) */
/* Nonzero while this thread runs a Python dataset's __getitem__ for a
 * loader: a loader freed then (the GC ran inside __getitem__) may be the one
 * whose worker this is, so it must not be joined from here. */
_Thread_local int in_getitem;
_Thread_local PyObject **consumer_interrupt;

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
               has_path ? PyUnicode_DecodeFSDefault(err->path) : none_ref()) <
          0 ||
      set_attr(exc, "errno",
               has_errno ? PyLong_FromLong(err->sys_errno) : none_ref()) < 0)
    return -1;
  return set_attr(exc, "cuda_error",
                  has_cuda ? PyLong_FromLong(err->cuda_error) : none_ref());
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
