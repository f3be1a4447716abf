/* No processes (worker_mode="thread", num_workers=0): filler.fill_local
 * fills the batch under the GIL on the loader's own threads; its
 * exceptions are kept as themselves, by token. */
#include "procset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Moves the pending exception into owner->local_errors under a new token
 * and describes it in msg. GIL held. */
static void local_store_error(ProcSetObject *owner, char *msg, size_t cap) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb && value)
    PyException_SetTraceback(value, tb);
  procset *ps = owner->ps;
  pthread_mutex_lock(&ps->mu);
  uint64_t token = ++ps->next_token;
  pthread_mutex_unlock(&ps->mu);
  PyObject *text = value ? PyObject_Str(value) : NULL;
  const char *ctext = text ? PyUnicode_AsUTF8(text) : NULL;
  if (!ctext)
    PyErr_Clear();
  PyObject *where =
      value ? PyObject_GetAttrString(value, "_pinloader_sample") : NULL;
  long long sample =
      where && PyLong_Check(where) ? PyLong_AsLongLong(where) : -1;
  if (!where || PyErr_Occurred())
    PyErr_Clear();
  Py_XDECREF(where);
  char at[48] = "";
  if (sample >= 0)
    snprintf(at, sizeof at, " at dataset[%lld]", sample);
  snprintf(msg, cap, "%s%s: %.300s [pinloader-error %llu]",
           type ? ((PyTypeObject *)type)->tp_name : "an exception", at,
           ctext ? ctext : "", (unsigned long long)token);
  PyObject *key = PyLong_FromUnsignedLongLong(token);
  if (!key || !value || PyDict_SetItem(owner->local_errors, key, value) < 0)
    PyErr_Clear();
  Py_XDECREF(key);
  Py_XDECREF(text);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
}

/* A batch filled by filler.fill_local(buffer, offsets, indices, epoch,
 * seed, batch_index) -> bytes of extras, in this process. */
int local_read_batch(ProcSetObject *owner, const uint64_t *indices, uint32_t n,
                     const pl_batch_info *info, const pl_batch_dst *dst,
                     char *msg, size_t msg_len) {
  if (py_finalizing()) {
    snprintf(msg, msg_len, "the Python interpreter is shutting down");
    return 1;
  }
  PyGILState_STATE g = PyGILState_Ensure();
  in_getitem++;
  int rc = 0;
  PyObject *mv = PyMemoryView_FromMemory(
      dst->buffer, (Py_ssize_t)dst->buffer_bytes, PyBUF_WRITE);
  PyObject *offs = PyTuple_New(dst->nfields);
  PyObject *idx = PyList_New(n);
  for (int f = 0; offs && f < dst->nfields; f++)
    PyTuple_SET_ITEM(offs, f, PyLong_FromUnsignedLongLong(dst->offset[f]));
  for (uint32_t i = 0; idx && i < n; i++)
    PyList_SET_ITEM(idx, i, PyLong_FromUnsignedLongLong(indices[i]));
  PyObject *r = NULL;
  if (mv && offs && idx && !PyErr_Occurred())
    r = PyObject_CallMethod(owner->filler, "fill_local", "OOOKKK", mv, offs,
                            idx, (unsigned long long)info->epoch,
                            (unsigned long long)info->seed,
                            (unsigned long long)info->batch_index);
  if (r && PyBytes_Check(r) && PyBytes_GET_SIZE(r) > 0) {
    size_t len = (size_t)PyBytes_GET_SIZE(r);
    char *copy = malloc(len);
    if (copy) {
      memcpy(copy, PyBytes_AS_STRING(r), len);
      blob_put(owner->ps, BLOB_EXTRA, info->stream, info->epoch,
               info->batch_index, copy, len);
    }
  }
  if (!r) {
    if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
      /* Ctrl-C in the consumer's thread (num_workers=0): the loader gives
       * the batch back and the consumer's next() raises this exception.
       * Kept as itself, not re-signalled (PyErr_SetInterrupt): with SIGINT
       * ignored or handled by a handler that does not raise, a re-signal is
       * lost, and a read that raises again would be retried forever. */
      if (consumer_interrupt) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (tb)
          PyException_SetTraceback(value, tb);
        Py_XDECREF(type);
        Py_XDECREF(tb);
        Py_XSETREF(*consumer_interrupt, value);
      } else { /* a worker thread: the consumer sees the interrupt */
        PyErr_Clear();
        PyErr_SetInterrupt();
      }
      rc = PL_READ_INTERRUPTED;
    } else {
      local_store_error(owner, msg, msg_len);
      rc = 1;
    }
  }
  Py_XDECREF(r);
  Py_XDECREF(idx);
  Py_XDECREF(offs);
  Py_XDECREF(mv);
  in_getitem--;
  PyGILState_Release(g);
  return rc;
}
