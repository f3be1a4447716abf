/* SampleWriter: the common case of writing one sample into its place in a
 * batch, in C.
 *
 * A worker (process or thread) writes each sample's leaves into the batch
 * buffer's field views. _collate.write_sample does it in Python: a walk of
 * the template and a numpy setitem per leaf, 2-4 us a sample, 5-10% of a
 * 50 us augmentation. Here the same walk is a loop over a compiled
 * template and a memcpy per leaf.
 *
 * It takes only what _collate's fast path takes: a value of the probe's own
 * type (numpy array or scalar, CPU torch tensor, Python int / float / bool)
 * with the field's own buffer format and shape, in the probe's structure
 * (tuples and lists of the same length, dicts with the probe's keys in any
 * order, as torch's default_collate takes them). Anything else makes write() return False, having written
 * part of the sample perhaps, and the caller writes the whole sample through
 * _collate.write_sample, which takes every other value and names what is
 * wrong. So this file decides nothing about what a batch holds. */
#include "module.h"

#include <string.h>

enum {
  MAX_DIMS = 32, /* numpy's own limit before 2.0 */
  MAX_FORMAT = 8
};

/* How a field's value may come (python/pinloader/_collate.py, writer_kinds). */
enum {
  FAST_NONE = 0,   /* always the Python path */
  FAST_BUFFER = 1, /* exactly `type`, the buffer protocol: numpy arrays and scalars */
  FAST_TENSOR = 2, /* exactly `type`, through .numpy(): CPU torch tensors */
  FAST_INT = 3,
  FAST_FLOAT = 4,
  FAST_BOOL = 5
};

/* Where a field's values go, taken from its view [batch, *shape]. */
typedef struct {
  int kind;
  PyTypeObject *type; /* FAST_BUFFER, FAST_TENSOR: a reference */
  char *base;         /* sample 0's value */
  Py_ssize_t stride;  /* from one sample's value to the next */
  Py_ssize_t itemsize, nbytes;
  int ndim; /* of one sample's value */
  Py_ssize_t shape[MAX_DIMS];
  char format[MAX_FORMAT];
} leaf_dst;

/* The template compiled, in preorder: a field, or a node and its children
 * after it. */
enum { OP_FIELD, OP_SEQ, OP_DICT };

typedef struct {
  int kind;
  Py_ssize_t n;   /* OP_SEQ, OP_DICT: children; OP_FIELD: the field */
  PyObject *keys; /* OP_DICT: a tuple of str, a reference */
} op;

typedef struct {
  PyObject_HEAD
  PyObject *views;   /* kept: the memory written to */
  Py_ssize_t batch;  /* samples every view holds (the fewest) */
  leaf_dst *leaf;
  Py_ssize_t nleaf;
  op *ops;
  Py_ssize_t nops;
} SampleWriterObject;

/* ------------------------------------------------------------ setup */

static Py_ssize_t count_ops(PyObject *node) {
  if (!PyTuple_Check(node) || PyTuple_GET_SIZE(node) < 2 ||
      !PyUnicode_Check(PyTuple_GET_ITEM(node, 0))) {
    PyErr_SetString(PyExc_ValueError, "not a template node");
    return -1;
  }
  const char *kind = PyUnicode_AsUTF8(PyTuple_GET_ITEM(node, 0));
  if (!kind)
    return -1;
  if (!strcmp(kind, "field"))
    return 1;
  if (!strcmp(kind, "obj")) {
    PyErr_SetString(PyExc_ValueError,
                    "a template with object leaves has no SampleWriter");
    return -1;
  }
  PyObject *children = PyTuple_GET_ITEM(node, PyTuple_GET_SIZE(node) - 1);
  if (!PyList_Check(children)) {
    PyErr_SetString(PyExc_ValueError, "a template node's children are a list");
    return -1;
  }
  Py_ssize_t n = 1;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(children); i++) {
    Py_ssize_t c = count_ops(PyList_GET_ITEM(children, i));
    if (c < 0)
      return -1;
    n += c;
  }
  return n;
}

/* Fills ops from *at on; the node was checked by count_ops. */
static int compile_node(SampleWriterObject *w, PyObject *node, Py_ssize_t *at) {
  const char *kind = PyUnicode_AsUTF8(PyTuple_GET_ITEM(node, 0));
  op *o = &w->ops[(*at)++];
  if (!strcmp(kind, "field")) {
    o->kind = OP_FIELD;
    o->n = PyLong_AsSsize_t(PyTuple_GET_ITEM(node, 1));
    if (o->n < 0 || o->n >= w->nleaf) {
      if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "a field leaf without its view");
      return -1;
    }
    return 0;
  }
  PyObject *children = PyTuple_GET_ITEM(node, PyTuple_GET_SIZE(node) - 1);
  o->n = PyList_GET_SIZE(children);
  o->kind = OP_SEQ;
  if (!strcmp(kind, "dict")) {
    PyObject *keys = PyTuple_GET_ITEM(node, 1);
    if (!PyList_Check(keys) || PyList_GET_SIZE(keys) != o->n) {
      PyErr_SetString(PyExc_ValueError, "a dict node's keys are a list, one a child");
      return -1;
    }
    o->kind = OP_DICT;
    o->keys = PyList_AsTuple(keys);
    if (!o->keys)
      return -1;
  }
  for (Py_ssize_t i = 0; i < o->n; i++)
    if (compile_node(w, PyList_GET_ITEM(children, i), at) < 0)
      return -1;
  return 0;
}

/* d from view: a writable C-contiguous-per-sample array [batch, *shape];
 * *batch lowered to the samples it holds. */
static int leaf_setup(leaf_dst *d, PyObject *view, PyObject *how,
                      Py_ssize_t *batch) {
  int kind;
  PyObject *type = Py_None;
  if (!PyArg_ParseTuple(how, "iO", &kind, &type))
    return -1;
  Py_buffer b;
  if (PyObject_GetBuffer(view, &b, PyBUF_RECORDS) < 0)
    return -1;
  int rc = -1;
  /* A view the writer cannot use (more dimensions than it keeps, an odd
   * format, samples not in C order) leaves its field to write_sample. */
  d->kind = FAST_NONE;
  Py_ssize_t held = b.ndim >= 1 ? b.shape[0] : 0;
  if (held < *batch)
    *batch = held;
  if (b.ndim < 1 || b.ndim - 1 > MAX_DIMS || !b.format ||
      strlen(b.format) >= MAX_FORMAT) {
    rc = 0;
    goto done;
  }
  d->base = b.buf;
  d->stride = b.strides[0];
  d->itemsize = b.itemsize;
  d->ndim = b.ndim - 1;
  d->nbytes = b.itemsize;
  Py_ssize_t want = b.itemsize;
  for (int i = b.ndim - 1; i >= 1; i--) { /* C order within a sample */
    if (b.strides[i] != want && b.shape[i] > 1) {
      rc = 0;
      goto done;
    }
    want *= b.shape[i];
  }
  d->kind = kind;
  for (int i = 0; i < d->ndim; i++) {
    d->shape[i] = b.shape[i + 1];
    d->nbytes *= d->shape[i];
  }
  strcpy(d->format, b.format);
  /* A number goes in as the dtype default_collate gives it, or not here. */
  if ((kind == FAST_INT && (strcmp(b.format, "l") && strcmp(b.format, "q"))) ||
      (kind == FAST_INT && b.itemsize != 8) ||
      (kind == FAST_FLOAT && (strcmp(b.format, "d") || b.itemsize != 8)) ||
      (kind == FAST_BOOL && (strcmp(b.format, "?") || b.itemsize != 1)) ||
      ((kind == FAST_INT || kind == FAST_FLOAT || kind == FAST_BOOL) && d->ndim))
    d->kind = FAST_NONE;
  if (d->kind == FAST_BUFFER || d->kind == FAST_TENSOR) {
    if (!PyType_Check(type)) {
      PyErr_SetString(PyExc_TypeError, "a buffer or tensor field needs its type");
      goto done;
    }
    Py_INCREF(type);
    d->type = (PyTypeObject *)type;
  } else if (d->kind < FAST_NONE || d->kind > FAST_BOOL) {
    d->kind = FAST_NONE;
  }
  rc = 0;
done:
  PyBuffer_Release(&b); /* the view, kept in w->views, keeps the memory */
  return rc;
}

static void writer_dealloc(SampleWriterObject *w) {
  for (Py_ssize_t i = 0; w->leaf && i < w->nleaf; i++)
    Py_XDECREF(w->leaf[i].type);
  for (Py_ssize_t i = 0; w->ops && i < w->nops; i++)
    Py_XDECREF(w->ops[i].keys);
  PyMem_Free(w->leaf);
  PyMem_Free(w->ops);
  Py_XDECREF(w->views);
  Py_TYPE(w)->tp_free((PyObject *)w);
}

static PyObject *writer_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  static char *names[] = {"root", "kinds", "views", NULL};
  PyObject *root, *kinds, *views;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO!O!", names, &root,
                                   &PyList_Type, &kinds, &PyList_Type, &views))
    return NULL;
  if (PyList_GET_SIZE(kinds) != PyList_GET_SIZE(views)) {
    PyErr_SetString(PyExc_ValueError, "one kind a view");
    return NULL;
  }
  Py_ssize_t nops = count_ops(root);
  if (nops < 0)
    return NULL;
  SampleWriterObject *w = (SampleWriterObject *)type->tp_alloc(type, 0);
  if (!w)
    return NULL;
  w->views = PyList_AsTuple(views);
  w->nleaf = PyList_GET_SIZE(views);
  w->leaf = PyMem_Calloc((size_t)w->nleaf + 1, sizeof *w->leaf);
  w->ops = PyMem_Calloc((size_t)nops, sizeof *w->ops);
  if (!w->views || !w->leaf || !w->ops) {
    if (!PyErr_Occurred())
      PyErr_NoMemory();
    goto fail;
  }
  w->nops = nops;
  w->batch = PY_SSIZE_T_MAX;
  for (Py_ssize_t i = 0; i < w->nleaf; i++)
    if (leaf_setup(&w->leaf[i], PyTuple_GET_ITEM(w->views, i),
                   PyList_GET_ITEM(kinds, i), &w->batch) < 0)
      goto fail;
  Py_ssize_t at = 0;
  if (compile_node(w, root, &at) < 0)
    goto fail;
  return (PyObject *)w;
fail:
  Py_DECREF(w);
  return NULL;
}

/* ------------------------------------------------------------ writing */

/* One row of n items of `size` bytes, src `stride` apart, to dst in a run:
 * a constant-size copy each, for the sizes numpy has. */
#define COPY_ROW(T)                                                            \
  for (Py_ssize_t i = 0; i < n; i++)                                           \
    memcpy(dst + i * (Py_ssize_t)sizeof(T), src + i * stride, sizeof(T))

static void copy_row(char *dst, const char *src, Py_ssize_t n,
                     Py_ssize_t stride, Py_ssize_t size) {
  if (stride == size) {
    memcpy(dst, src, (size_t)(n * size));
    return;
  }
  switch (size) {
  case 1:
    COPY_ROW(uint8_t);
    break;
  case 2:
    COPY_ROW(uint16_t);
    break;
  case 4:
    COPY_ROW(uint32_t);
    break;
  case 8:
    COPY_ROW(uint64_t);
    break;
  default:
    for (Py_ssize_t i = 0; i < n; i++)
      memcpy(dst + i * size, src + i * stride, (size_t)size);
  }
}

/* Copies an array (any strides: a transpose, a flip) to dst in C order. A
 * transposed float32 image (astype keeps the HWC layout of a CHW view) is
 * 3,072 items of 4 bytes 12 apart: typed copies, not a call each. */
static void copy_strided(char *dst, const char *src, int ndim,
                         const Py_ssize_t *shape, const Py_ssize_t *strides,
                         Py_ssize_t itemsize) {
  if (ndim == 0) {
    memcpy(dst, src, (size_t)itemsize);
    return;
  }
  if (ndim == 1) {
    copy_row(dst, src, shape[0], strides[0], itemsize);
    return;
  }
  Py_ssize_t inner = itemsize;
  for (int i = 1; i < ndim; i++)
    inner *= shape[i];
  for (Py_ssize_t i = 0; i < shape[0]; i++)
    copy_strided(dst + i * inner, src + i * strides[0], ndim - 1, shape + 1,
                 strides + 1, itemsize);
}

/* 1: value written; 0: not the fast case; -1: an exception to raise. */
static int write_buffer(const leaf_dst *d, PyObject *value, char *dst) {
  Py_buffer b;
  if (PyObject_GetBuffer(value, &b, PyBUF_RECORDS_RO) < 0) {
    /* The exporter's refusals; anything else (a KeyboardInterrupt in a
     * Python __buffer__) is the caller's to see. */
    if (!PyErr_ExceptionMatches(PyExc_BufferError) &&
        !PyErr_ExceptionMatches(PyExc_TypeError) &&
        !PyErr_ExceptionMatches(PyExc_ValueError))
      return -1;
    PyErr_Clear();
    return 0;
  }
  int ok = b.itemsize == d->itemsize && b.ndim == d->ndim && b.format &&
           !strcmp(b.format, d->format);
  for (int i = 0; ok && i < d->ndim; i++)
    ok = b.shape[i] == d->shape[i];
  if (ok && d->nbytes) { /* a zero-size leaf: nothing to copy */
    if (PyBuffer_IsContiguous(&b, 'C'))
      memcpy(dst, b.buf, (size_t)d->nbytes);
    else
      copy_strided(dst, b.buf, b.ndim, b.shape, b.strides, b.itemsize);
  }
  PyBuffer_Release(&b);
  return ok;
}

/* 1 written, 0 not the fast case, -1 an exception to raise. */
static int write_leaf(const leaf_dst *d, PyObject *value, Py_ssize_t k) {
  char *dst = d->base + k * d->stride;
  switch (d->kind) {
  case FAST_BUFFER:
    return Py_TYPE(value) == d->type ? write_buffer(d, value, dst) : 0;
  case FAST_TENSOR: {
    if (Py_TYPE(value) != d->type)
      return 0;
    PyObject *a = PyObject_CallMethod(value, "numpy", NULL);
    if (!a) { /* a tensor on a device, with grad, of another dtype... */
      if (!PyErr_ExceptionMatches(PyExc_TypeError) &&
          !PyErr_ExceptionMatches(PyExc_RuntimeError))
        return -1; /* as _collate's fast path: those only */
      PyErr_Clear();
      return 0;
    }
    int r = write_buffer(d, a, dst);
    Py_DECREF(a);
    return r;
  }
  case FAST_INT: {
    if (!PyLong_CheckExact(value))
      return 0;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
      PyErr_Clear(); /* the Python path raises numpy's OverflowError */
      return 0;
    }
    int64_t v = x;
    memcpy(dst, &v, sizeof v);
    return 1;
  }
  case FAST_FLOAT: {
    if (!PyFloat_CheckExact(value))
      return 0;
    double v = PyFloat_AS_DOUBLE(value);
    memcpy(dst, &v, sizeof v);
    return 1;
  }
  case FAST_BOOL:
    if (value != Py_True && value != Py_False)
      return 0;
    *dst = value == Py_True;
    return 1;
  default:
    return 0;
  }
}

/* A tuple or list whose items are its storage: write_sample takes len()
 * and iterates, which a subclass may override (a namedtuple does not). */
static int plain_sequence(PyObject *value) {
  PyTypeObject *t = Py_TYPE(value), *base;
  if (PyTuple_Check(value))
    base = &PyTuple_Type;
  else if (PyList_Check(value))
    base = &PyList_Type;
  else
    return 0;
  return t == base ||
         (t->tp_iter == base->tp_iter && t->tp_as_sequence &&
          t->tp_as_sequence->sq_length == base->tp_as_sequence->sq_length);
}

static int write_node(const SampleWriterObject *w, const op **at,
                      PyObject *value, Py_ssize_t k) {
  const op *o = (*at)++;
  if (o->kind == OP_FIELD)
    return write_leaf(&w->leaf[o->n], value, k);
  if (o->kind == OP_SEQ) {
    if (!plain_sequence(value) || PySequence_Fast_GET_SIZE(value) != o->n)
      return 0;
    for (Py_ssize_t i = 0; i < o->n; i++) {
      /* Checked at each item: a tensor's .numpy() before it may run Python
       * code, and that code may have changed the list. */
      if (PySequence_Fast_GET_SIZE(value) != o->n)
        return 0;
      PyObject *child = PySequence_Fast_GET_ITEM(value, i);
      Py_INCREF(child); /* a list's item, while .numpy() may run code */
      int r = write_node(w, at, child, k);
      Py_DECREF(child);
      if (r <= 0)
        return r;
    }
    return 1;
  }
  /* OP_DICT: a dict with the probe's keys, in any order (default_collate
   * looks each key of the first sample up in every sample, so keys only a
   * later sample has are left out, as there). */
  if (!PyDict_CheckExact(value) || PyDict_GET_SIZE(value) < o->n)
    return 0;
  PyObject *vals = PyTuple_New(o->n); /* owned: .numpy() may run code */
  if (!vals)
    return -1;
  Py_ssize_t i = 0;
  for (; i < o->n; i++) {
    PyObject *val = PyDict_GetItemWithError(value, PyTuple_GET_ITEM(o->keys, i));
    if (!val) {
      Py_DECREF(vals);
      return PyErr_Occurred() ? -1 : 0; /* a key's __eq__ raised; or missing */
    }
    Py_INCREF(val);
    PyTuple_SET_ITEM(vals, i, val);
  }
  int r = 1;
  for (Py_ssize_t j = 0; r > 0 && j < o->n; j++)
    r = write_node(w, at, PyTuple_GET_ITEM(vals, j), k);
  Py_DECREF(vals);
  return r;
}

static PyObject *writer_write(SampleWriterObject *w, PyObject *args) {
  PyObject *value;
  Py_ssize_t k;
  if (!PyArg_ParseTuple(args, "On", &value, &k))
    return NULL;
  if (k < 0 || k >= w->batch)
    Py_RETURN_FALSE; /* the Python path raises numpy's IndexError */
  const op *at = w->ops;
  int r = write_node(w, &at, value, k);
  if (r < 0)
    return NULL;
  return PyBool_FromLong(r);
}

static PyMethodDef writer_methods[] = {
    {"write", (PyCFunction)writer_write, METH_VARARGS,
     "write(sample, k) -> True when the sample's leaves are written into "
     "sample k of the views; False: not the common case, write it through "
     "_collate.write_sample (part of it may be written already)"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject SampleWriterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pinloader._pinloader.SampleWriter",
    .tp_basicsize = sizeof(SampleWriterObject),
    .tp_dealloc = (destructor)writer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "SampleWriter(root, kinds, views): writes samples of the "
              "template `root` into the field views (arrays [batch, *shape]); "
              "kinds[f] = (kind, type) as _collate.writer_kinds makes them",
    .tp_methods = writer_methods,
    .tp_new = writer_new,
};

int pl_py_init_samples(PyObject *m) {
  return pl_py_add_type(m, &SampleWriterType, "SampleWriter");
}
