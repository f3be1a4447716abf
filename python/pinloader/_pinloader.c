/*
 * pinloader._pinloader: the CPython binding of include/pinloader.h.
 *
 * This file is the module and its errors; the types live in files of their
 * own (module.h says which): datasets.c (Dataset, the Python per-sample
 * callback), batches.c (Batch, FieldArray, DLPack), loader.c (Loader, the
 * option table, the log hook), iter.c (LoaderIter, explicit orders),
 * procset.c and the files it names (worker processes: ProcSet and the
 * batch callback); the helpers they all share are common.c and fields.c,
 * which call none of them (module.h draws the tree).
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
#include "module.h"

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
    PyObject *row = split
                        ? Py_BuildValue("{s:s,s:s,s:N,s:s}", "kind", s->kind,
                                        "usage", s->usage, "keys",
                                        PySequence_Tuple(split), "doc", s->doc)
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
      pl_py_init_workers(m) < 0 || pl_py_init_samples(m) < 0 ||
      pl_py_init_dtypes(m) < 0)
    goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}

