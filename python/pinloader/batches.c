/* Batches: the holder every Batch, FieldArray and exported DLManagedTensor
 * shares (an atomic reference count, released on the consumer's stream),
 * the Batch type, and the DLPack / buffer-protocol export of FieldArray. */
#include "dlpack.h"
#include "module.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
static PyObject *batch_stream_get(BatchObject *self, void *unused) {
  return PyLong_FromUnsignedLongLong(pl_batch_stream(self->h->batch));
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
    {"stream", (getter)batch_stream_get, NULL,
     "the loader's job stream it came from (pl_batch_stream)", NULL},
    {"num_fields", (getter)batch_num_fields_get, NULL, "fields", NULL},
    {"sample_indices", (getter)batch_sample_indices, NULL,
     "dataset index of each sample", NULL},
    {"device", (getter)batch_device_get, NULL, "('cpu'|'cuda', index)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject BatchType = {
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
  if (f->dtype == PL_BFLOAT16) { /* the struct module has no bfloat16 */
    PyErr_SetString(PyExc_BufferError,
                    "bfloat16 has no buffer-protocol format: use __dlpack__ "
                    "(torch)");
    view->obj = NULL;
    return -1;
  }
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

PyTypeObject FieldArrayType = {
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


PyObject *batch_wrap(pl_batch *b) {
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

int pl_py_init_batches(PyObject *m) {
  if (pl_py_add_type(m, &BatchType, "Batch") < 0 ||
      pl_py_add_type(m, &FieldArrayType, "FieldArray") < 0)
    return -1;
  return 0;
}
