/* Dtypes and fields as Python names them: the one dtype table (the
 * library's PL_DTYPE_MAP: by name, by buffer format, by DLPack code) and
 * the one parser of a field tuple (name, dtype, shape[, offset]), used by
 * every file that takes fields from Python. Calls no other file of the
 * extension. */
#include "module.h"

#include <string.h>

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
#define PL_DTYPE_KIND_(NAME, name, size, format, code)                         \
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
int dtype_from_format(const char *fmt, Py_ssize_t itemsize, pl_dtype *out) {
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
#define PL_DTYPE_FORMAT_(NAME, name, bytes, format, dlpack)                    \
  [PL_##NAME] = {format, 0},
      PL_DTYPE_MAP(PL_DTYPE_FORMAT_)
#undef PL_DTYPE_FORMAT_
  };
  return ((unsigned)t < PL_DTYPE_COUNT_) ? f[t] : "B";
}

DLDataType dl_dtype(pl_dtype t) {
  static const uint8_t codes[PL_DTYPE_COUNT_] = {
#define PL_DTYPE_DLPACK_(NAME, name, bytes, format, dlpack)                    \
  [PL_##NAME] = dlpack,
      PL_DTYPE_MAP(PL_DTYPE_DLPACK_)
#undef PL_DTYPE_DLPACK_
  };
  DLDataType d = {(unsigned)t < PL_DTYPE_COUNT_ ? codes[t] : kDLUInt,
                  (uint8_t)(pl_dtype_size(t) * 8), 1};
  return d;
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
int fields_from(PyObject *seq, pl_field **fields, uint64_t **offsets, int *n) {
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

static int add_dtype(PyObject *d, const char *name, Py_ssize_t size,
                     char format) {
  PyObject *v = format ? Py_BuildValue("(nC)", size, (int)format)
                       : Py_BuildValue("(nO)", size, Py_None);
  int rc = v ? PyDict_SetItemString(d, name, v) : -1;
  Py_XDECREF(v);
  return rc;
}

/* _pinloader.DTYPES: {"uint8": (1, "B"), ..., "bfloat16": (2, None)}, the
 * table in the library's order: each dtype's size and buffer format (None
 * where there is none, so no numpy array holds it). */
int pl_py_init_dtypes(PyObject *m) {
  PyObject *d = PyDict_New();
  int rc = d ? 0 : -1;
#define PL_DTYPE_ROW_(NAME, name, size, format, code)                          \
  if (rc == 0)                                                                 \
    rc = add_dtype(d, #name, size, format);
  PL_DTYPE_MAP(PL_DTYPE_ROW_)
#undef PL_DTYPE_ROW_
  if (rc == 0 && PyModule_AddObject(m, "DTYPES", d) == 0)
    return 0;
  Py_XDECREF(d);
  return -1;
}
