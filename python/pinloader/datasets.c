/* Datasets: native sources opened by name, Python map-style datasets read
 * through the per-sample callback (worker_mode="thread" readers of
 * datasets.from_python, to_float32 views), the Dataset type, and how a
 * Python value becomes a field (dtype, shape, the bytes). */
#include "module.h"
#include "data/dataset.h" /* pl_dataset_sample_path (mod_samples) */

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Samples larger than this are copied with the GIL released. */
#define COPY_WITHOUT_GIL_BYTES (256 * 1024)
/* How the callback's message names the failed call (raise_callback takes
 * the sample index from pl_error.sample_index, not from this text). */
#define GETITEM_MARK "__getitem__("

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

/* The stored exception of the failed sample named in err, re-raised with a
 * note naming the sample index. */
PyObject *raise_callback(pycb *cb, const pl_error *err) {
  if (!cb || err->sample_index == UINT64_MAX)
    return raise_pl(err);
  unsigned long long index = err->sample_index;
  PyObject *key = PyLong_FromUnsignedLongLong(index);
  PyObject *exc = key ? PyDict_GetItemWithError(cb->errors, key) : NULL;
  Py_XINCREF(exc);
  /* Only this sample's exception is taken: others stored for prefetched
   * batches (of this epoch or the next) keep theirs (issue 17, item 8). */
  if (key && exc && PyDict_DelItem(cb->errors, key) < 0)
    PyErr_Clear();
  Py_XDECREF(key);
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

/* ------------------------------------------------------------ Dataset */

PyObject *dataset_wrap(pl_dataset *ds, pycb *cb) {
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


/* read(i) -> tuple of bytes, one per field (pl_dataset_read). */
static PyObject *dataset_read(DatasetObject *self, PyObject *arg) {
  unsigned long long index = PyLong_AsUnsignedLongLong(arg);
  if (index == (unsigned long long)-1 && PyErr_Occurred())
    return NULL;
  int n = pl_dataset_num_fields(self->ds);
  PyObject *out = PyTuple_New(n);
  /* As many fields as the loader takes: the pointer array is allocated. */
  void **dst = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof *dst);
  if (!out || !dst) {
    Py_XDECREF(out);
    PyMem_Free(dst);
    return PyErr_NoMemory();
  }
  for (int i = 0; i < n; i++) {
    PyObject *b = PyBytes_FromStringAndSize(
        NULL, (Py_ssize_t)pl_field_bytes(pl_dataset_field(self->ds, i)));
    if (!b) {
      Py_DECREF(out);
      PyMem_Free(dst);
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
  PyMem_Free(dst);
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

PyTypeObject DatasetType = {
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

/* ---- shards: open_shards(paths, options, fetcher), a Python fetcher
 * fetcher(url, offset, length) -> bytes (length None: to the end), called
 * from the workers with the GIL taken. */
static int pyfetch_call(void *user, const char *url, uint64_t off,
                        uint64_t len, pl_shards_sink sink, void *sink_user,
                        char *msg, size_t cap) {
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject *n = len ? PyLong_FromUnsignedLongLong(len) : Py_NewRef(Py_None);
  PyObject *r = n ? PyObject_CallFunction((PyObject *)user, "sKO", url,
                                          (unsigned long long)off, n)
                  : NULL;
  Py_XDECREF(n);
  int rc = 1;
  Py_buffer view;
  if (!r) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *text = value ? PyObject_Str(value) : NULL;
    snprintf(msg, cap, "%s: %s", type ? ((PyTypeObject *)type)->tp_name : "?",
             text && PyUnicode_Check(text) ? PyUnicode_AsUTF8(text) : "");
    Py_XDECREF(text), Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
    PyErr_Clear();
  } else if (PyObject_GetBuffer(r, &view, PyBUF_SIMPLE) < 0) {
    PyErr_Clear();
    snprintf(msg, cap, "returned %s, not bytes", Py_TYPE(r)->tp_name);
  } else {
    rc = sink(sink_user, view.buf, (size_t)view.len) ? 1 : 0;
    if (rc)
      snprintf(msg, cap, "%zd bytes for a range of %llu", view.len,
               (unsigned long long)len);
    PyBuffer_Release(&view);
  }
  Py_XDECREF(r);
  PyGILState_Release(g);
  return rc;
}

static void pyfetch_free(void *user) {
  PyGILState_STATE g = PyGILState_Ensure();
  Py_DECREF((PyObject *)user);
  PyGILState_Release(g);
}

static PyObject *mod_open_shards(PyObject *m, PyObject *args) {
  const char *options;
  PyObject *paths_obj, *keep, *fetcher;
  const char **paths;
  int n;
  if (!PyArg_ParseTuple(args, "OsO:open_shards", &paths_obj, &options,
                        &fetcher) ||
      paths_from(paths_obj, &keep, &paths, &n) < 0)
    return NULL;
  bool own = fetcher != Py_None;
  if (own)
    Py_INCREF(fetcher); /* the dataset's: pyfetch_free gives it back */
  pl_dataset *ds = NULL;
  pl_error err;
  pl_status s;
  Py_BEGIN_ALLOW_THREADS
  s = pl_dataset_open_shards_fetch(paths, n, options,
                                   own ? pyfetch_call : NULL,
                                   own ? fetcher : NULL,
                                   own ? pyfetch_free : NULL, &ds, &err);
  Py_END_ALLOW_THREADS
  PyMem_Free(paths);
  Py_DECREF(keep);
  return s == PL_OK ? dataset_wrap(ds, NULL) : raise_pl(&err);
}
/* ---- end of shards */

/* replaced(dataset) -> samples the source replaced (on_error="skip"). */
static PyObject *mod_replaced(PyObject *m, PyObject *arg) {
  if (!PyObject_TypeCheck(arg, &DatasetType))
    return PyErr_Format(PyExc_TypeError, "expected a Dataset");
  return PyLong_FromUnsignedLongLong(
      pl_dataset_replaced(((DatasetObject *)arg)->ds));
}

/* samples(dataset) -> [(path, label), ...] of an image source (the file
 * each sample is read from), or None for sources without files per
 * sample. */
static PyObject *mod_samples(PyObject *m, PyObject *arg) {
  (void)m;
  if (!PyObject_TypeCheck(arg, &DatasetType))
    return PyErr_Format(PyExc_TypeError, "expected a Dataset");
  const pl_dataset *ds = ((DatasetObject *)arg)->ds;
  uint64_t n = pl_dataset_length(ds);
  int64_t label = 0;
  if (n == 0 || !pl_dataset_sample_path(ds, 0, &label))
    Py_RETURN_NONE;
  PyObject *out = PyList_New((Py_ssize_t)n);
  for (uint64_t i = 0; out && i < n; i++) {
    const char *path = pl_dataset_sample_path(ds, i, &label);
    PyObject *item = Py_BuildValue("(NL)", PyUnicode_DecodeFSDefault(path),
                                   (long long)label);
    if (!item) {
      Py_CLEAR(out);
      break;
    }
    PyList_SET_ITEM(out, (Py_ssize_t)i, item);
  }
  return out;
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


static PyMethodDef dataset_functions[] = {
    {"open_idx", mod_open_idx, METH_VARARGS, "open_idx(images, labels)"},
    {"open_cifar10", mod_open_cifar10, METH_O, "open_cifar10([paths])"},
    {"open", mod_open, METH_VARARGS, "open(kind, [paths], options)"},
    {"open_shards", mod_open_shards, METH_VARARGS, /* shards */
     "open_shards([paths], options, fetcher or None)"},
    {"replaced", mod_replaced, METH_O, "replaced(dataset) -> int"},
    {"samples", mod_samples, METH_O,
     "samples(dataset) -> [(path, label)] of an image source, else None"},
    {"open_records", (PyCFunction)(void (*)(void))mod_open_records,
     METH_VARARGS | METH_KEYWORDS,
     "open_records(paths, header_bytes, record_bytes, fields)"},
    {"to_float32", mod_to_float32, METH_VARARGS,
     "to_float32(dataset, field, scale)"},
    {"from_callback", mod_from_callback, METH_VARARGS,
     "from_callback(dataset, length, fields, mode, keys, convert)"},
    {"describe", mod_describe, METH_VARARGS,
     "describe(obj, convert=None) -> (dtype, shape)"},
    {NULL, NULL, 0, NULL}};

int pl_py_init_datasets(PyObject *m) {
  if (pl_py_add_type(m, &DatasetType, "Dataset") < 0)
    return -1;
  return PyModule_AddFunctions(m, dataset_functions);
}
