/* The Loader type: the option table as keyword arguments (range-checked in
 * C), the log hook into Python's logging, next() with the GIL released in
 * slices (Ctrl-C), errors as the consumer should see them. */
#include "module.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long one wait for a batch lasts before checking for Ctrl-C. */
#define WAIT_SLICE_S 0.1

/* ------------------------------------------------------------ Loader */


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
  case PL_OPT_DECODE:
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
/* One transform: (kind, field or None, input_layout, height, width,
 * padding, fill, p, dtype, mean, std, layout), as pinloader/transforms.py
 * builds it. */
static int transform_from(PyObject *tup, pl_transform *t) {
  static const char *const kinds[] = {"", "RANDOM_CROP", "RANDOM_HFLIP",
                                      "CONVERT", "NORMALIZE", "LAYOUT",
                                      "TO_INT64"};
  const char *kind, *field, *dtype;
  int in_layout, h, w, pad, fill, layout;
  float p;
  PyObject *mean, *std;
  if (!PyTuple_Check(tup) ||
      !PyArg_ParseTuple(tup, "sziiiiifsOOi:transform", &kind, &field,
                        &in_layout, &h, &w, &pad, &fill, &p, &dtype, &mean,
                        &std, &layout))
    return -1;
  int k = 0;
  for (int i = 1; i < (int)(sizeof kinds / sizeof *kinds); i++)
    if (!strcmp(kinds[i], kind))
      k = i;
  if (!k) {
    PyErr_Format(PyExc_ValueError, "unknown transform kind '%s'", kind);
    return -1;
  }
  pl_transform_init(t, (pl_transform_kind)k);
  t->field = field;
  t->input_layout = (pl_layout)in_layout;
  t->size[0] = h, t->size[1] = w;
  t->padding = pad;
  t->fill = (uint8_t)fill;
  t->p = p;
  t->layout = (pl_layout)layout;
  pl_dtype d;
  if (dtype_from_name(dtype, &d) < 0)
    return -1;
  t->dtype = d;
  PyObject *ms[2] = {mean, std};
  for (int j = 0; j < 2; j++) {
    PyObject *seq = PySequence_Fast(ms[j], "mean and std are sequences");
    if (!seq)
      return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > PL_TRANSFORM_MAX_CHANNELS) {
      Py_DECREF(seq);
      PyErr_SetString(PyExc_ValueError, "more than 16 channels in mean/std");
      return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
      double v = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
      (j ? t->std : t->mean)[i] = (float)v;
    }
    Py_DECREF(seq);
    if (PyErr_Occurred())
      return -1;
    t->num_channels = (int)n;
  }
  return 0;
}

/* The list into a PyMem array (freed by the caller after create); its
 * field names point into the list's strings, alive during create. */
static int transforms_from(PyObject *list, pl_loader_config *cfg) {
  if (list == Py_None)
    return 0;
  PyObject *seq = PySequence_Fast(list, "transforms must be a sequence");
  if (!seq)
    return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  pl_transform *t = PyMem_Calloc((size_t)n + 1, sizeof *t);
  int rc = t ? 0 : -1;
  if (!t)
    PyErr_NoMemory();
  for (Py_ssize_t i = 0; rc == 0 && i < n; i++)
    rc = transform_from(PySequence_Fast_GET_ITEM(seq, i), &t[i]);
  Py_DECREF(seq);
  if (rc < 0) {
    PyMem_Free(t);
    return -1;
  }
  cfg->transforms = t;
  cfg->num_transforms = (int)n;
  return 0;
}

static int loader_config(PyObject *args, PyObject *kw, DatasetObject **dso,
                         pl_loader_config *cfg) {
  if (!PyArg_ParseTuple(args, "O!:Loader", &DatasetType, dso))
    return -1;
  pl_loader_config_init(cfg);
  cfg->log = py_log;
  unsigned keep = 0;
  PyObject *key, *val, *transforms = Py_None;
  Py_ssize_t pos = 0;
  while (kw && PyDict_Next(kw, &pos, &key, &val)) {
    /* transforms: a list, not a scalar option of the table */
    if (PyUnicode_Check(key) &&
        PyUnicode_CompareWithASCIIString(key, "transforms") == 0) {
      transforms = val;
      continue;
    }
    if (option_set(cfg, key, val, &keep) < 0)
      return -1;
  }
  pl_error err;
  if (pl_loader_config_shard_env(cfg, keep, &err) != PL_OK) {
    PyErr_SetString(PyExc_ValueError, err.message);
    return -1;
  }
  return transforms_from(transforms, cfg);
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
  case PL_OPT_DECODE:
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
                                      "bytes", "real", "device", "log_level",
                                      "auto_int", "decode"};
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
  PyMem_Free((void *)cfg.transforms); /* the loader copied the list */
  cfg.transforms = NULL;
  cfg.num_transforms = 0;
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

/* pyworkers: check_options(**options) -> the options as the Loader would
 * take them: the same range checks, the environment's sharding, rank below
 * world_size, without making a loader. A DataLoader whose worker
 * processes start at the first iteration refuses bad arguments at once. */
static PyObject *mod_check_options(PyObject *m, PyObject *args, PyObject *kw) {
  pl_loader_config cfg;
  pl_loader_config_init(&cfg);
  unsigned keep = 0;
  PyObject *key, *val;
  Py_ssize_t pos = 0;
  while (kw && PyDict_Next(kw, &pos, &key, &val))
    if (option_set(&cfg, key, val, &keep) < 0)
      return NULL;
  pl_error err;
  if (pl_loader_config_shard_env(&cfg, keep, &err) != PL_OK) {
    PyErr_SetString(PyExc_ValueError, err.message);
    return NULL;
  }
  if (pl_loader_config_check(&cfg, &err) != PL_OK)
    return raise_pl(&err);
  return config_dict(&cfg);
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
  Py_CLEAR(self->pending); /* pyworkers: a batch kept for the next next() */
  loader_destroy(self);
  Py_CLEAR(self->dso);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Guards a call that releases the GIL: one consumer thread at a time. */
int loader_enter(LoaderObject *self) {
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
  Py_CLEAR(self->pending);
  loader_destroy(self);
  Py_RETURN_NONE;
}


PyObject *raise_next(LoaderObject *self, const pl_error *err) {
  if (err->status == PL_CALLBACK)
    return raise_callback(self->dso->cb, err);
  if (err->status != PL_EXHAUSTED)
    return raise_pl(err);
  pl_loader_stats st;
  pl_loader_stats_get(self->ld, &st);
  /* The C message in Python's words (tensors, not pl_batch_release). */
  char msg[256];
  snprintf(msg, sizeof msg,
           "all %llu batch buffers are held by tensors of earlier batches: "
           "release some (drop the tensors, or .clone() what you keep) or "
           "raise DataLoader(max_batch_buffers=...)",
           (unsigned long long)st.batch_buffers);
  return raise_status(PL_EXHAUSTED, msg);
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
    PyObject *interrupted = NULL, **outer = consumer_interrupt;
    consumer_interrupt = &interrupted;
    Py_BEGIN_ALLOW_THREADS
    s = pl_loader_next_timed(self->ld, WAIT_SLICE_S, &b, &err);
    Py_END_ALLOW_THREADS
    consumer_interrupt = outer;
    if (interrupted && s == PL_NOT_READY) { /* the batch was given back */
      PyObject *type = (PyObject *)Py_TYPE(interrupted);
      Py_INCREF(type);
      PyErr_Restore(type, interrupted, PyException_GetTraceback(interrupted));
      self->busy = 0;
      return NULL;
    }
    Py_XDECREF(interrupted);
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

/* The prefetch depth as the C side resolved it (pl_tune_setup; PL_AUTO:
 * tuned, so it may grow while running): Python reads it rather than work
 * it out a second time. */
static PyObject *loader_prefetch(LoaderObject *self, void *unused) {
  if (loader_open(self) < 0)
    return NULL;
  pl_loader_timings t;
  pl_loader_timings_get(self->ld, &t, sizeof t);
  return PyLong_FromLong(t.prefetch);
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
    {"prefetch", (getter)loader_prefetch, NULL,
     "prefetch depth now, in batches (resolved by the C loader)", NULL},
    {"closed", (getter)loader_closed, NULL, "closed", NULL},
    {"options", (getter)loader_options, NULL,
     "{option: value} the loader was created with (after the environment's "
     "sharding)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject LoaderType = {
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


static PyMethodDef loader_functions[] = {
    {"check_options", (PyCFunction)(void (*)(void))mod_check_options,
     METH_VARARGS | METH_KEYWORDS,
     "check_options(**options) -> dict: the Loader's checks, no loader"},
    {"loader_options", mod_loader_options, METH_NOARGS,
     "loader_options() -> [{name, type, default, min, max, doc, values}]: "
     "the C option table"},
    {NULL, NULL, 0, NULL}};

int pl_py_init_loader(PyObject *m) {
  PyObject *logging = PyImport_ImportModule("logging");
  py_logger = logging ? PyObject_CallMethod(logging, "getLogger", "s",
                                            "pinloader")
                      : NULL;
  Py_XDECREF(logging);
  if (!py_logger || pl_py_add_type(m, &LoaderType, "Loader") < 0)
    return -1;
  return PyModule_AddFunctions(m, loader_functions);
}
