/* The iterator a DataLoader hands out, and explicit orders.
 *
 * LoaderIter(loader, pack, check, on_error) is written in C so that no
 * batch is lost to Ctrl-C (issue 17, item 6). A batch taken from the C
 * loader is kept in loader->pending until the packed item is returned:
 *
 *   - KeyboardInterrupt while waiting: nothing was taken, nothing is lost;
 *   - KeyboardInterrupt while packing, or pending when packing ends
 *     (checked last, with PyErr_CheckSignals): the batch stays pending and
 *     the next next(), on this iterator or a new one, returns it first;
 *   - once tp_iternext returns, a `for` loop stores the item before any
 *     signal handler can run, so the consumer has it.
 *
 * The iterator records how its last next() ended, for the DataLoader to
 * decide what a new iter() does: `mid_epoch` (batches of an unfinished
 * epoch were delivered) and `resumable` (the last next() raised an
 * interruption that lost nothing: Ctrl-C, PL_EXHAUSTED), so that iterating
 * again continues the same epoch (issue 17, item 7). */
#include "module.h"

#include <structmember.h>

typedef struct {
  PyObject_HEAD
  LoaderObject *loader;
  PyObject *pack;     /* pack(batch) -> item */
  PyObject *check;    /* check() raises when this iterator was superseded */
  PyObject *on_error; /* on_error(iterator, exc) -> exception to raise */
  PyObject *skip;     /* pack returned this: a batch with nothing in it */
  PyObject *on_end;   /* on_end(): the epoch ran to its end (StopIteration) */
  PyObject *weakrefs;
  PyObject *workers; /* _workers: the worker processes, as torch's iterators have */
  int mid_epoch;
  int resumable;
  int ended;
  int busy; /* a next() is running (perhaps with the GIL released) */
} LoaderIterObject;

static void it_dealloc(LoaderIterObject *self) {
  Py_CLEAR(self->loader);
  Py_CLEAR(self->pack);
  Py_CLEAR(self->check);
  Py_CLEAR(self->on_error);
  Py_CLEAR(self->skip);
  Py_CLEAR(self->on_end);
  Py_CLEAR(self->workers);
  if (self->weakrefs)
    PyObject_ClearWeakRefs((PyObject *)self);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *it_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  PyObject *loader, *pack, *check = Py_None, *on_error = Py_None;
  PyObject *skip = Py_None, *on_end = Py_None;
  static char *kwlist[] = {"loader", "pack", "check", "on_error", "skip",
                           "on_end", NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O|OOOO:LoaderIter", kwlist,
                                   &LoaderType, &loader, &pack, &check,
                                   &on_error, &skip, &on_end))
    return NULL;
  LoaderIterObject *self = (LoaderIterObject *)type->tp_alloc(type, 0);
  if (!self)
    return NULL;
  Py_INCREF(loader);
  Py_INCREF(pack);
  Py_INCREF(check);
  Py_INCREF(on_error);
  self->loader = (LoaderObject *)loader;
  self->pack = pack;
  self->check = check;
  self->on_error = on_error;
  Py_INCREF(skip);
  self->skip = skip;
  self->on_end = Py_NewRef(on_end);
  return (PyObject *)self;
}

/* The pending exception, passed through on_error(self, exc). NULL. */
static PyObject *it_fail(LoaderIterObject *self) {
  if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt))
    self->resumable = 1; /* nothing was taken from the loader */
  else
    self->resumable = 0;
  if (self->on_error == Py_None)
    return NULL;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb && value)
    PyException_SetTraceback(value, tb);
  PyObject *res = PyObject_CallFunctionObjArgs(self->on_error, (PyObject *)self,
                                               value ? value : Py_None, NULL);
  if (!res) { /* on_error raised: that is the error now */
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return NULL;
  }
  if (PyExceptionInstance_Check(res) && res != value) {
    PyErr_SetObject((PyObject *)Py_TYPE(res), res);
    Py_DECREF(res);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return NULL;
  }
  Py_DECREF(res);
  PyErr_Restore(type, value, tb);
  return NULL;
}

static PyObject *it_next_one(LoaderIterObject *self);

static PyObject *it_next_inner(LoaderIterObject *self);

/* The flags are kept on the loader too: the DataLoader reads them when the
 * next iter() begins, after this iterator may be gone.
 *
 * A next() while another thread is inside one (of this iterator, or of
 * any iterator over the same loader) is refused before it touches
 * anything: no batch is taken, no flag changes, so the other thread's
 * loop goes on with every batch. */
static PyObject *it_next(LoaderIterObject *self) {
  if (self->busy || self->loader->busy) {
    PyErr_SetString(PyExc_RuntimeError,
                    "the loader is in use by another thread: drive one "
                    "loader from one thread at a time");
    return NULL;
  }
  self->busy = 1;
  PyObject *r = it_next_inner(self);
  self->busy = 0;
  self->loader->it_mid_epoch = self->mid_epoch;
  self->loader->it_resumable = self->resumable;
  return r;
}

/* The epoch ran to its end: StopIteration, after on_end(). NULL. */
static PyObject *it_end(LoaderIterObject *self) {
  self->mid_epoch = 0;
  self->resumable = 0;
  self->ended = 1;
  if (self->on_end != Py_None) {
    PyObject *r = PyObject_CallNoArgs(self->on_end);
    Py_XDECREF(r);
  }
  return NULL;
}

static PyObject *it_next_inner(LoaderIterObject *self) {
  if (self->ended) /* as torch's: an exhausted iterator stays exhausted */
    return NULL;
  if (self->check != Py_None) {
    PyObject *r = PyObject_CallNoArgs(self->check);
    if (!r)
      return NULL;
    /* A Python dataset's C loader is made at the first next(), once the
     * first sample gave the layout: check() returns it, and this iterator
     * goes on with it (the loader it was made with stood in until then). */
    if (PyObject_TypeCheck(r, &LoaderType) && r != (PyObject *)self->loader)
      Py_SETREF(self->loader, (LoaderObject *)r);
    else
      Py_DECREF(r);
  }
  for (;;) {
    PyObject *item = it_next_one(self);
    if (!item || self->skip == Py_None || item != self->skip)
      return item;
    Py_DECREF(item); /* an empty batch (an IterableDataset's worker ran out) */
  }
}

static PyObject *it_next_one(LoaderIterObject *self) {
  LoaderObject *lo = self->loader;
  PyObject *batch = lo->pending;
  lo->pending = NULL;
  if (!batch) {
    batch = PyObject_CallMethod((PyObject *)lo, "next", NULL);
    if (!batch)
      return it_fail(self);
    if (batch == Py_None) {
      Py_DECREF(batch);
      return it_end(self); /* StopIteration */
    }
  }
  PyObject *item = PyObject_CallOneArg(self->pack, batch);
  if (!item) {
    if (PyErr_ExceptionMatches(PyExc_StopIteration)) {
      /* pack ended the epoch (every IterableDataset worker ran out). */
      PyErr_Clear();
      Py_DECREF(batch);
      return it_end(self);
    }
    if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
      lo->pending = batch; /* delivered first next time */
      self->mid_epoch = 1;
      self->resumable = 1;
      return NULL;
    }
    Py_DECREF(batch);
    return it_fail(self);
  }
  /* A signal that came in while packing: raise it now, with the batch
   * kept, rather than after returning, when it would be lost. */
  if (PyErr_CheckSignals() < 0) {
    Py_DECREF(item);
    lo->pending = batch;
    self->mid_epoch = 1;
    self->resumable = 1;
    return NULL;
  }
  Py_DECREF(batch);
  self->mid_epoch = 1;
  self->resumable = 0;
  return item;
}

static PyMemberDef it_members[] = {
    {"mid_epoch", T_INT, offsetof(LoaderIterObject, mid_epoch), 0,
     "batches of an unfinished epoch were delivered"},
    {"resumable", T_INT, offsetof(LoaderIterObject, resumable), 0,
     "the last next() raised an interruption that lost nothing"},
    {"ended", T_INT, offsetof(LoaderIterObject, ended), 0,
     "the epoch ended (StopIteration)"},
    {"busy", T_INT, offsetof(LoaderIterObject, busy), READONLY,
     "a next() is running"},
    {"_workers", T_OBJECT, offsetof(LoaderIterObject, workers), 0,
     "the worker processes (torch's iterators name theirs so; None: none)"},
    {NULL, 0, 0, 0, NULL}};

static PyTypeObject LoaderIterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pinloader._pinloader.LoaderIter",
    .tp_basicsize = sizeof(LoaderIterObject),
    .tp_dealloc = (destructor)it_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "LoaderIter(loader, pack, check=None, on_error=None, skip=None,"
              " on_end=None): the batches of a Loader, packed; none lost to "
              "Ctrl-C",
    .tp_weaklistoffset = offsetof(LoaderIterObject, weakrefs),
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)it_next,
    .tp_members = it_members,
    .tp_new = it_new,
};

/* set_order / queue_order(loader, epoch, indices, starts): the C call
 * with two buffers of uint64 (numpy arrays). */
static PyObject *give_order(PyObject *args, int queue) {
  PyObject *loader, *ind_obj, *st_obj;
  unsigned long long epoch;
  if (!PyArg_ParseTuple(args, queue ? "O!KOO:queue_order" : "O!KOO:set_order",
                        &LoaderType, &loader, &epoch, &ind_obj, &st_obj))
    return NULL;
  LoaderObject *lo = (LoaderObject *)loader;
  Py_buffer ind, st;
  if (PyObject_GetBuffer(ind_obj, &ind, PyBUF_C_CONTIGUOUS) < 0)
    return NULL;
  if (PyObject_GetBuffer(st_obj, &st, PyBUF_C_CONTIGUOUS) < 0) {
    PyBuffer_Release(&ind);
    return NULL;
  }
  PyObject *res = NULL;
  if (ind.len % 8 || st.len % 8 || st.len < 8) {
    PyErr_SetString(PyExc_ValueError,
                    "indices and starts must be uint64 arrays (starts has "
                    "nbatches + 1 entries)");
  } else if (loader_enter(lo) == 0) {
    uint64_t nb = (uint64_t)st.len / 8 - 1;
    const uint64_t *starts = st.buf;
    pl_error err;
    pl_status s;
    if (nb && starts[nb] > (uint64_t)ind.len / 8) {
      lo->busy = 0;
      PyErr_SetString(PyExc_ValueError, "starts runs past the indices");
      goto out;
    }
    if (!queue)
      Py_CLEAR(lo->pending); /* a new epoch: a kept batch is not wanted */
    Py_BEGIN_ALLOW_THREADS
    s = queue ? pl_loader_queue_order(lo->ld, epoch, ind.buf, starts, nb, &err)
              : pl_loader_set_order(lo->ld, epoch, ind.buf, starts, nb, &err);
    Py_END_ALLOW_THREADS
    lo->busy = 0;
    if (s != PL_OK)
      raise_pl(&err);
    else
      res = Py_NewRef(Py_None);
  }
out:
  PyBuffer_Release(&ind);
  PyBuffer_Release(&st);
  return res;
}

static PyObject *mod_set_order(PyObject *m, PyObject *args) {
  return give_order(args, 0);
}

static PyObject *mod_queue_order(PyObject *m, PyObject *args) {
  return give_order(args, 1);
}

/* drop_pending(loader): forget a batch kept for the next next(). */
static PyObject *mod_drop_pending(PyObject *m, PyObject *loader) {
  if (!PyObject_TypeCheck(loader, &LoaderType))
    return PyErr_Format(PyExc_TypeError, "expected a Loader");
  Py_CLEAR(((LoaderObject *)loader)->pending);
  Py_RETURN_NONE;
}

/* iter_state(loader) -> (mid_epoch, resumable) of the last next() */
static PyObject *mod_iter_state(PyObject *m, PyObject *loader) {
  if (!PyObject_TypeCheck(loader, &LoaderType))
    return PyErr_Format(PyExc_TypeError, "expected a Loader");
  LoaderObject *lo = (LoaderObject *)loader;
  return Py_BuildValue("(ii)", lo->it_mid_epoch, lo->it_resumable);
}

/* reset_iter_state(loader): a new epoch position (set_epoch, restore). */
static PyObject *mod_reset_iter_state(PyObject *m, PyObject *loader) {
  if (!PyObject_TypeCheck(loader, &LoaderType))
    return PyErr_Format(PyExc_TypeError, "expected a Loader");
  LoaderObject *lo = (LoaderObject *)loader;
  lo->it_mid_epoch = lo->it_resumable = 0;
  Py_CLEAR(lo->pending);
  Py_RETURN_NONE;
}

/* has_pending(loader) -> bool */
static PyObject *mod_has_pending(PyObject *m, PyObject *loader) {
  if (!PyObject_TypeCheck(loader, &LoaderType))
    return PyErr_Format(PyExc_TypeError, "expected a Loader");
  return PyBool_FromLong(((LoaderObject *)loader)->pending != NULL);
}

static PyMethodDef iter_functions[] = {
    {"set_order", mod_set_order, METH_VARARGS,
     "set_order(loader, epoch, indices, starts): the next epoch's batches, "
     "batch k = indices[starts[k]:starts[k+1]] (uint64 arrays)"},
    {"queue_order", mod_queue_order, METH_VARARGS,
     "queue_order(loader, epoch, indices, starts): the explicit epoch after "
     "the current one, filled before the current one ends"},
    {"drop_pending", mod_drop_pending, METH_O,
     "drop_pending(loader): forget a batch kept for the next next()"},
    {"has_pending", mod_has_pending, METH_O,
     "has_pending(loader) -> bool"},
    {"iter_state", mod_iter_state, METH_O,
     "iter_state(loader) -> (mid_epoch, resumable) of the last next()"},
    {"reset_iter_state", mod_reset_iter_state, METH_O,
     "reset_iter_state(loader): forget the last iteration (and a pending "
     "batch)"},
    {NULL, NULL, 0, NULL}};

int pl_py_init_iter(PyObject *m) {
  if (PyType_Ready(&LoaderIterType) < 0)
    return -1;
  Py_INCREF(&LoaderIterType);
  if (PyModule_AddObject(m, "LoaderIter", (PyObject *)&LoaderIterType) < 0) {
    Py_DECREF(&LoaderIterType);
    return -1;
  }
  return PyModule_AddFunctions(m, iter_functions);
}
