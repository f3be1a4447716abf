/* The wire (wire.h): requests sent with the batch memory's fd, replies
 * read with poll() on the socket and the process's sentinel in slices that
 * watch for close(); and _pinloader.WIRE, the format's constants for
 * _worker.py. */
#include "procset.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

_Static_assert(sizeof(req_head) == 4 * 4 + 7 * 8, "REQ_FORMAT is =4I7Q");
_Static_assert(sizeof(rep_head) == 2 * 4 + 8, "REP_FORMAT is =IIQ");

/* Sends the whole request, the fd with its first byte. 0, or an errno. */
static int send_request(int sock, const void *buf, size_t len, int fd) {
  const char *p = buf;
  size_t done = 0;
  while (done < len) {
    struct iovec iov = {(void *)(p + done), len - done};
    struct msghdr mh = {0};
    union {
      char buf[CMSG_SPACE(sizeof(int))];
      struct cmsghdr align;
    } ctl;
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (done == 0 && fd >= 0) {
      memset(&ctl, 0, sizeof ctl);
      mh.msg_control = ctl.buf;
      mh.msg_controllen = sizeof ctl.buf;
      struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(int));
      memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    }
    ssize_t k = sendmsg(sock, &mh, MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR)
        continue;
      return errno;
    }
    done += (size_t)k;
  }
  return 0;
}

/* Reads exactly len bytes, waiting with poll() on the socket and the
 * process's sentinel; gives up on death, the deadline or close(). */
static wait_result recv_exact(procset *ps, channel *ch, void *buf, size_t len,
                              double deadline, int *err_no) {
  char *p = buf;
  size_t done = 0;
  while (done < len) {
    struct pollfd pf[2] = {{ch->sock, POLLIN, 0}, {ch->sentinel, POLLIN, 0}};
    int ms = WAIT_SLICE_MS;
    if (deadline > 0) {
      double left = deadline - now_s();
      if (left <= 0)
        return WAIT_TIMEOUT;
      if (left * 1000 < ms)
        ms = (int)(left * 1000) + 1;
    }
    int r = poll(pf, ch->sentinel >= 0 ? 2 : 1, ms);
    if (r < 0 && errno != EINTR) {
      *err_no = errno;
      return WAIT_BROKEN;
    }
    if (is_closing(ps))
      return WAIT_CLOSED;
    if (r <= 0)
      continue;
    if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t k = recv(ch->sock, p + done, len - done, MSG_DONTWAIT);
      if (k > 0) {
        done += (size_t)k;
        continue;
      }
      if (k == 0 || (errno != EAGAIN && errno != EINTR))
        return WAIT_DIED; /* the process's end closed: it is gone */
      continue;
    }
    if (pf[1].revents) /* exited with nothing (more) to read */
      return WAIT_DIED;
  }
  return WAIT_OK;
}

/* A close-on-exec copy of fd, or -1. */
/* Sends ch the request to fill samples indices[0..n-1] at batch positions
 * first.. of dst: 0, an errno (the worker is gone), or -1 (no memory for
 * the request). */
int send_fill(procset *ps, channel *ch, const uint64_t *indices, uint32_t n,
              uint32_t first, const pl_batch_info *info,
              const pl_batch_dst *dst) {
  size_t len = sizeof(req_head) + ((size_t)dst->nfields + n) * 8;
  uint8_t *req = malloc(len);
  if (!req)
    return -1;
  int seeded;
  uint64_t base_seed = base_seed_of(ps, info->epoch, &seeded);
  req_head h = {REQ_MAGIC,
                (uint32_t)dst->nfields,
                n,
                (seeded ? REQ_RESEED : 0u) | (dst->report ? REQ_PROGRESS : 0u),
                dst->buffer_id,
                dst->buffer_bytes,
                info->epoch,
                info->seed,
                info->batch_index,
                base_seed,
                first};
  memcpy(req, &h, sizeof h);
  memcpy(req + sizeof h, dst->offset, (size_t)dst->nfields * 8);
  memcpy(req + sizeof h + (size_t)dst->nfields * 8, indices, (size_t)n * 8);
  int e = send_request(ch->sock, req, len, dst->fd);
  free(req);
  return e;
}

/* Waits for ch's reply: progress records first (to dst->report, each
 * restarting the clock), then the head and its payload (malloc'd; NULL
 * when empty or on failure). The timeout is per sample, as the loader's
 * stall clock (which the progress records restart): a worker is killed a
 * while after that clock has failed the batch with PL_TIMEOUT naming the
 * sample. */
wait_result read_reply(procset *ps, channel *ch, const pl_batch_info *info,
                       const pl_batch_dst *dst, rep_head *rh, char **payload,
                       int *err_no) {
  double grace = info->timeout_s * 1.5 + 0.5;
  double deadline = info->timeout_s > 0 ? now_s() + grace : 0;
  wait_result r;
  *payload = NULL;
  for (;;) {
    r = recv_exact(ps, ch, rh, sizeof *rh, deadline, err_no);
    if (r != WAIT_OK || rh->magic != REP_MAGIC || rh->status != REP_PROGRESS)
      break;
    if (dst->report)
      dst->report(dst, rh->len);
    if (deadline > 0)
      deadline = now_s() + grace;
  }
  if (r == WAIT_OK && (rh->magic != REP_MAGIC || rh->len > MAX_REPLY))
    return WAIT_BROKEN;
  if (r != WAIT_OK || !rh->len)
    return r;
  if (!(*payload = malloc((size_t)rh->len))) {
    *err_no = ENOMEM;
    return WAIT_BROKEN;
  }
  r = recv_exact(ps, ch, *payload, (size_t)rh->len, deadline, err_no);
  if (r != WAIT_OK) {
    free(*payload);
    *payload = NULL;
  }
  return r;
}

static int add_int(PyObject *d, const char *name, long long v) {
  PyObject *o = PyLong_FromLongLong(v);
  int rc = o ? PyDict_SetItemString(d, name, o) : -1;
  Py_XDECREF(o);
  return rc;
}

static int add_str(PyObject *d, const char *name, const char *v) {
  PyObject *o = PyUnicode_FromString(v);
  int rc = o ? PyDict_SetItemString(d, name, o) : -1;
  Py_XDECREF(o);
  return rc;
}

/* _pinloader.WIRE: {"REQ": "=4I7Q", "REP": "=IIQ", "REQ_MAGIC": ...,
 * "CHUNK": 64, ...}, the names _worker.py uses. */
int pl_py_init_wire(PyObject *m) {
  PyObject *d = PyDict_New();
  if (!d || add_str(d, "REQ", REQ_FORMAT) < 0 ||
      add_str(d, "REP", REP_FORMAT) < 0 ||
      add_int(d, "REQ_MAGIC", REQ_MAGIC) < 0 ||
      add_int(d, "REP_MAGIC", REP_MAGIC) < 0 ||
      add_int(d, "REQ_RESEED", REQ_RESEED) < 0 ||
      add_int(d, "REQ_PROGRESS", REQ_PROGRESS) < 0 ||
      add_int(d, "REQ_PROBE", REQ_PROBE) < 0 ||
      add_int(d, "REQ_TEMPLATE", REQ_TEMPLATE) < 0 ||
      add_int(d, "REP_OK", REP_OK) < 0 ||
      add_int(d, "REP_ERROR", REP_ERROR) < 0 ||
      add_int(d, "REP_PROGRESS", REP_PROGRESS) < 0 ||
      add_int(d, "CHUNK", SPLIT_CHUNK) < 0 ||
      PyModule_AddObject(m, "WIRE", d) < 0) {
    Py_XDECREF(d);
    return -1;
  }
  return 0;
}
