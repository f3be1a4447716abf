/* The ProcSet type (one loader's worker processes), the batch callback
 * that a loader thread calls for each batch (pl_read_batch_fn, without the
 * GIL), and from_workers, the dataset it fills. procset.h says how a batch
 * travels; the parts are the files it names. */
#include "procset.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <unistd.h>

static PyTypeObject ProcSetType;

/* A close-on-exec copy of fd, or -1. */
static int fcntl_dup(long fd) {
  return fd < 0 || fd > INT32_MAX ? -1 : fcntl((int)fd, F_DUPFD_CLOEXEC, 3);
}

static int ps_read_batch(void *user, const uint64_t *indices, uint32_t n,
                         const pl_batch_info *info, const pl_batch_dst *dst,
                         char *msg, size_t msg_len) {
  ProcSetObject *owner = user;
  procset *ps = owner->ps;
  /* Turns (PL_BATCH_IN_ORDER) matter only where batch k goes to worker
   * k % n (channel_take takes its place, then passes the turn on). */
  if (owner->filler || ps->balanced)
    dst->queued(dst);
  if (owner->filler)
    return local_read_batch(owner, indices, n, info, dst, msg, msg_len);
  if (dst->fd < 0) {
    snprintf(msg, msg_len, "the batch memory is not shared (no memfd)");
    return 1;
  }
  if (split_wanted(ps, info, dst)) {
    int r = read_split(ps, indices, n, info, dst, msg, msg_len);
    if (r >= 0)
      return r;
  }
  channel *ch = channel_take(ps, info, dst);
  if (!ch) {
    snprintf(msg, msg_len, "the loader's worker processes were shut down");
    return 1;
  }
  if (ch == STALE_CHANNEL) {
    snprintf(msg, msg_len, "a batch of an abandoned stream (not read)");
    return 1;
  }
  int w = (int)(ch - ps->ch);
  if (ch->dead) { /* read without the lock: only its own holder writes it */
    no_longer_running(ps, ch, msg, msg_len);
    return 1;
  }
  char samples[160];
  describe_samples(indices, n, samples, sizeof samples);
  int e = send_fill(ps, ch, indices, n, 0, info, dst);
  if (e) {
    send_failed(ps, ch, e, info, samples, msg, msg_len);
    return 1;
  }
  rep_head rh;
  char *payload;
  int err_no = 0;
  wait_result r = read_reply(ps, ch, info, dst, &rh, &payload, &err_no);
  if (r != WAIT_OK) {
    wait_failed(ps, ch, r, err_no, info, samples, msg, msg_len);
    return 1;
  }
  channel_give(ps, ch, 0);
  if (rh.status == REP_OK) {
    if (payload)
      blob_put(ps, BLOB_EXTRA, info->stream, info->epoch, info->batch_index,
               payload, (size_t)rh.len);
    return 0;
  }
  store_error(ps, w, ch->pid, payload, rh.len, msg, msg_len);
  return 1;
}

static void procset_shutdown(procset *ps) {
  pthread_mutex_lock(&ps->mu);
  ps->closing = 1;
  pthread_cond_broadcast(&ps->cv);
  pthread_mutex_unlock(&ps->mu);
  /* The processes read EOF and exit; a thread polling sees POLLHUP. */
  for (int i = 0; i < ps->n; i++)
    if (ps->ch[i].sock >= 0)
      shutdown(ps->ch[i].sock, SHUT_RDWR);
}

static void procset_free(procset *ps) {
  if (!ps)
    return;
  procset_shutdown(ps);
  for (int i = 0; i < ps->n; i++) {
    if (ps->ch[i].sock >= 0)
      close(ps->ch[i].sock);
    if (ps->ch[i].sentinel >= 0)
      close(ps->ch[i].sentinel);
  }
  while (ps->blobs) {
    blob *b = ps->blobs;
    ps->blobs = b->next;
    free(b);
  }
  pthread_mutex_destroy(&ps->mu);
  pthread_cond_destroy(&ps->cv);
  free(ps->ch);
  free(ps);
}

static void procset_dealloc(ProcSetObject *self) {
  procset *ps = self->ps;
  self->ps = NULL;
  if (self->pid != (long)getpid())
    ps = NULL; /* inherited by fork: shutting its sockets would cut the
                  parent's workers off; leave it (and its fds) alone */
  Py_CLEAR(self->filler);
  Py_CLEAR(self->local_errors);
  procset_free(ps);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* ProcSet(socks, sentinels, pids, filler=None, balanced=False,
 * split=False, ready=None): takes copies (dup) of the fds; with a filler and no
 * processes, batches are filled in-process; balanced: any idle worker
 * takes the next batch (else batch k goes to worker k % n, as torch's);
 * split (balanced only): the first round's batches may be split in chunks
 * over idle workers (read_split), for batches that are fixed-shape arrays
 * with no collate_fn; ready: per worker, whether its "ready" reply has been
 * read (default: all); one that has not gets no batch until set_ready. */
static PyObject *procset_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  static char *names[] = {"socks",    "sentinels", "pids",  "filler",
                          "balanced", "split",     "ready", NULL};
  PyObject *socks, *sents, *pids, *filler = Py_None, *ready = Py_None;
  int balanced = 0, split = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|OppO:ProcSet", names, &socks,
                                   &sents, &pids, &filler, &balanced, &split,
                                   &ready))
    return NULL;
  Py_ssize_t n = PySequence_Size(socks);
  Py_ssize_t least = filler != Py_None ? 0 : 1;
  if (n < least || n > 4096 || PySequence_Size(sents) != n ||
      PySequence_Size(pids) != n ||
      (ready != Py_None && PySequence_Size(ready) != n)) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_ValueError,
                      "socks, sentinels, pids (and ready): one per worker "
                      "(1 to 4096)");
    return NULL;
  }
  procset *ps = calloc(1, sizeof *ps);
  if (ps)
    ps->ch = calloc((size_t)n, sizeof *ps->ch);
  if (!ps || !ps->ch) {
    free(ps);
    return PyErr_NoMemory();
  }
  pthread_mutex_init(&ps->mu, NULL);
  pthread_cond_init(&ps->cv, NULL);
  ps->n = (int)n;
  ps->balanced = balanced;
  ps->split = balanced && split;
  for (Py_ssize_t i = 0; i < n; i++)
    ps->ch[i].sock = ps->ch[i].sentinel = -1;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *a = PySequence_GetItem(socks, i);
    PyObject *b = a ? PySequence_GetItem(sents, i) : NULL;
    PyObject *c = b ? PySequence_GetItem(pids, i) : NULL;
    long fa = a ? PyLong_AsLong(a) : -1, fb = b ? PyLong_AsLong(b) : -1;
    long pid = c ? PyLong_AsLong(c) : -1;
    Py_XDECREF(a);
    Py_XDECREF(b);
    Py_XDECREF(c);
    if (PyErr_Occurred()) {
      procset_free(ps);
      return NULL;
    }
    int is_ready = 1;
    if (ready != Py_None) {
      PyObject *r = PySequence_GetItem(ready, i);
      is_ready = r ? PyObject_IsTrue(r) : -1;
      Py_XDECREF(r);
      if (is_ready < 0) {
        procset_free(ps);
        return NULL;
      }
    }
    ps->ch[i].ready = is_ready;
    ps->ch[i].sock = fcntl_dup(fa);
    ps->ch[i].sentinel = fb >= 0 ? fcntl_dup(fb) : -1;
    ps->ch[i].pid = pid;
    if (ps->ch[i].sock < 0 || (fb >= 0 && ps->ch[i].sentinel < 0)) {
      PyErr_SetFromErrno(PyExc_OSError);
      procset_free(ps);
      return NULL;
    }
  }
  ProcSetObject *self = (ProcSetObject *)type->tp_alloc(type, 0);
  if (!self) {
    procset_free(ps);
    return NULL;
  }
  self->ps = ps;
  self->pid = (long)getpid();
  if (filler != Py_None) {
    self->local_errors = PyDict_New();
    if (!self->local_errors) {
      Py_DECREF(self);
      return NULL;
    }
    Py_INCREF(filler);
    self->filler = filler;
  }
  return (PyObject *)self;
}

static PyObject *blob_bytes(blob *b) {
  if (!b)
    Py_RETURN_NONE;
  PyObject *r = PyBytes_FromStringAndSize(b->data, (Py_ssize_t)b->len);
  free(b);
  return r;
}

static PyObject *ps_take_error(ProcSetObject *self, PyObject *arg) {
  unsigned long long token = PyLong_AsUnsignedLongLong(arg);
  if (token == (unsigned long long)-1 && PyErr_Occurred())
    return NULL;
  if (self->local_errors) { /* the exception object itself */
    PyObject *exc = PyDict_GetItemWithError(self->local_errors, arg);
    if (!exc) {
      if (PyErr_Occurred())
        return NULL;
      Py_RETURN_NONE;
    }
    Py_INCREF(exc);
    if (PyDict_DelItem(self->local_errors, arg) < 0)
      PyErr_Clear();
    return exc;
  }
  return blob_bytes(blob_take(self->ps, BLOB_ERROR, token, 0, 0));
}

static PyObject *ps_take_extra(ProcSetObject *self, PyObject *args) {
  unsigned long long stream, epoch, index;
  if (!PyArg_ParseTuple(args, "KKK:take_extra", &stream, &epoch, &index))
    return NULL;
  return blob_bytes(blob_take(self->ps, BLOB_EXTRA, stream, epoch, index));
}

static PyObject *ps_clear_extras(ProcSetObject *self, PyObject *unused) {
  procset *ps = self->ps;
  pthread_mutex_lock(&ps->mu);
  for (blob **p = &ps->blobs; *p;) {
    if ((*p)->kind == BLOB_EXTRA) {
      blob *b = *p;
      *p = b->next;
      free(b);
    } else {
      p = &(*p)->next;
    }
  }
  pthread_mutex_unlock(&ps->mu);
  Py_RETURN_NONE;
}

static PyObject *ps_set_base_seed(ProcSetObject *self, PyObject *args) {
  unsigned long long epoch, seed;
  if (!PyArg_ParseTuple(args, "KK:set_base_seed", &epoch, &seed))
    return NULL;
  procset *ps = self->ps;
  pthread_mutex_lock(&ps->mu);
  if (ps->nseeds == EPOCH_SEEDS) { /* forget the oldest */
    memmove(ps->seed_epoch, ps->seed_epoch + 1, (EPOCH_SEEDS - 1) * 8);
    memmove(ps->seed_value, ps->seed_value + 1, (EPOCH_SEEDS - 1) * 8);
    ps->nseeds--;
  }
  ps->seed_epoch[ps->nseeds] = epoch;
  ps->seed_value[ps->nseeds++] = seed;
  pthread_mutex_unlock(&ps->mu);
  Py_RETURN_NONE;
}

static PyObject *ps_set_ready(ProcSetObject *self, PyObject *arg) {
  long w = PyLong_AsLong(arg);
  procset *ps = self->ps;
  if (w == -1 && PyErr_Occurred())
    return NULL;
  if (!ps || w < 0 || w >= ps->n) {
    PyErr_SetString(PyExc_IndexError, "no such worker");
    return NULL;
  }
  pthread_mutex_lock(&ps->mu);
  ps->ch[w].ready = 1;
  pthread_cond_broadcast(&ps->cv);
  pthread_mutex_unlock(&ps->mu);
  Py_RETURN_NONE;
}

static PyObject *ps_shutdown(ProcSetObject *self, PyObject *unused) {
  if (self->pid == (long)getpid())
    procset_shutdown(self->ps);
  Py_RETURN_NONE;
}

/* close(): after the loader is destroyed (no thread uses a channel any
 * more), the sockets and sentinels are closed now, not when the last batch
 * is released. */
static PyObject *ps_close(ProcSetObject *self, PyObject *unused) {
  procset *ps = self->ps;
  if (!ps || self->pid != (long)getpid())
    Py_RETURN_NONE;
  procset_shutdown(ps);
  pthread_mutex_lock(&ps->mu);
  for (int i = 0; i < ps->n; i++) {
    if (ps->ch[i].sock >= 0)
      close(ps->ch[i].sock);
    if (ps->ch[i].sentinel >= 0)
      close(ps->ch[i].sentinel);
    ps->ch[i].sock = ps->ch[i].sentinel = -1;
    ps->ch[i].dead = 1;
  }
  pthread_mutex_unlock(&ps->mu);
  Py_RETURN_NONE;
}

static PyObject *ps_dead(ProcSetObject *self, void *unused) {
  procset *ps = self->ps;
  PyObject *l = PyList_New(ps->n);
  pthread_mutex_lock(&ps->mu);
  for (int i = 0; l && i < ps->n; i++)
    PyList_SET_ITEM(l, i, PyBool_FromLong(ps->ch[i].dead));
  pthread_mutex_unlock(&ps->mu);
  return l;
}

static PyMethodDef ps_methods[] = {
    {"take_error", (PyCFunction)ps_take_error, METH_O,
     "take_error(token) -> bytes or None: a worker's pickled exception"},
    {"take_extra", (PyCFunction)ps_take_extra, METH_VARARGS,
     "take_extra(stream, epoch, batch_index) -> bytes or None: the pickled "
     "part of a batch"},
    {"clear_extras", (PyCFunction)ps_clear_extras, METH_NOARGS,
     "forget the pickled parts of batches not taken"},
    {"set_base_seed", (PyCFunction)ps_set_base_seed, METH_VARARGS,
     "set_base_seed(epoch, seed): workers reseed as torch's fresh workers "
     "do when their first batch of `epoch` arrives"},
    {"set_ready", (PyCFunction)ps_set_ready, METH_O,
     "set_ready(w): worker w's ready reply was read; it may get batches"},
    {"shutdown", (PyCFunction)ps_shutdown, METH_NOARGS,
     "close the workers' sockets: they exit; waiting batches fail"},
    {"close", (PyCFunction)ps_close, METH_NOARGS,
     "close the fds (after the loader is destroyed)"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef ps_getset[] = {
    {"dead", (getter)ps_dead, NULL, "per worker: known to have exited", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject ProcSetType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pinloader._pinloader.ProcSet",
    .tp_basicsize = sizeof(ProcSetObject),
    .tp_dealloc = (destructor)procset_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ProcSet(socks, sentinels, pids): the worker processes of one "
              "loader, as the batch callback talks to them",
    .tp_methods = ps_methods,
    .tp_getset = ps_getset,
    .tp_new = procset_new,
};
static void owner_free(void *user) {
  PyObject *o = user;
#if PY_VERSION_HEX >= 0x030D0000
  int fin = Py_IsFinalizing();
#else
  int fin = _Py_IsFinalizing();
#endif
  if (fin)
    return; /* dies with the interpreter */
  PyGILState_STATE g = PyGILState_Ensure();
  Py_DECREF(o);
  PyGILState_Release(g);
}

/* from_workers(procset, length, fields) -> Dataset whose batches the
 * worker processes fill. */
static PyObject *mod_from_workers(PyObject *m, PyObject *args) {
  PyObject *owner, *fields_obj;
  unsigned long long length;
  if (!PyArg_ParseTuple(args, "O!KO:from_workers", &ProcSetType, &owner,
                        &length, &fields_obj))
    return NULL;
  Py_ssize_t n = PySequence_Size(fields_obj);
  if (n < 1 || n > 4096) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_ValueError,
                      "1 to 4096 fields (a sample with "
                      "no array-like leaf gets a placeholder field)");
    return NULL;
  }
  pl_field *fields;
  int nf;
  if (fields_from(fields_obj, &fields, NULL, &nf) < 0)
    return NULL;
  pl_dataset *ds = NULL;
  pl_error err;
  Py_INCREF(owner);
  int shared = ((ProcSetObject *)owner)->filler ? 0 : PL_BATCH_SHARED_MEMORY;
  pl_status s = pl_dataset_from_batch_callback(
      fields, nf, length, ps_read_batch, NULL, shared | PL_BATCH_IN_ORDER,
      owner, owner_free, &ds, &err);
  PyMem_Free(fields);
  if (s != PL_OK) {
    Py_DECREF(owner);
    return raise_pl(&err);
  }
  if (shared && pl_dataset_set_worker_cpu(ds, ps_worker_cpu, &err) != PL_OK) {
    pl_dataset_destroy(ds);
    return raise_pl(&err);
  }
  return dataset_wrap(ds, NULL);
}

/* die_with_parent(parent_pid) -> bool: a worker process asks for SIGKILL
 * when its parent goes (prctl PR_SET_PDEATHSIG), then checks the parent
 * did not go before it asked (elsewhere only that: the socket's EOF
 * tells the rest). False: the parent is gone already; the caller exits. */
static PyObject *mod_die_with_parent(PyObject *m, PyObject *arg) {
  long parent = PyLong_AsLong(arg);
  if (parent == -1 && PyErr_Occurred())
    return NULL;
#ifdef __linux__
  /* Refused (a seccomp profile): the socket's EOF is left to tell it. */
  (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
#endif
  return PyBool_FromLong((long)getppid() == parent);
}

static PyMethodDef worker_functions[] = {
    {"from_workers", mod_from_workers, METH_VARARGS,
     "from_workers(procset, length, fields) -> Dataset filled a batch at a "
     "time by worker processes"},
    {"die_with_parent", mod_die_with_parent, METH_O,
     "die_with_parent(parent_pid) -> bool: SIGKILL when the parent exits; "
     "False when it already has"},
    {NULL, NULL, 0, NULL}};

int pl_py_init_workers(PyObject *m) {
  if (pl_py_add_type(m, &ProcSetType, "ProcSet") < 0 || pl_py_init_wire(m) < 0)
    return -1;
  return PyModule_AddFunctions(m, worker_functions);
}
