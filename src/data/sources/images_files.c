/* One image file read whole (images_internal.h): opened without waiting
 * on a FIFO, checked to be a regular file of at most MAX_FILE_BYTES, read
 * to its end. */
#include "data/sources/images_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *pl_images_file_kind(mode_t m) {
  return S_ISFIFO(m)   ? "FIFO"
         : S_ISDIR(m)  ? "directory"
         : S_ISCHR(m)  ? "character device"
         : S_ISBLK(m)  ? "block device"
         : S_ISSOCK(m) ? "socket"
                       : "special file";
}

pl_status pl_images_open(const char *path, int *fd_out, size_t *size_out,
                         pl_error *err) {
  /* O_NONBLOCK: opening a FIFO (or a device) without it waits for a
   * writer, forever; the type is checked on the descriptor, after. It
   * changes nothing for the regular files read below. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    pl_errorf(err, PL_IO, "%s: cannot open: %s", path, strerror(e));
    pl_error_set_errno(err, e);
    pl_error_set_path(err, path);
    return PL_IO;
  }
  struct stat st;
  pl_status s = PL_OK;
  if (fstat(fd, &st) != 0)
    s = pl_errorf(err, PL_IO, "%s: cannot stat: %s", path, strerror(errno));
  else if (!S_ISREG(st.st_mode))
    s = pl_errorf(err, PL_IO, "%s: not a regular file (a %s)", path,
                  pl_images_file_kind(st.st_mode));
  else if ((uint64_t)st.st_size > MAX_FILE_BYTES)
    s = pl_errorf(err, PL_IO, "%s: %llu bytes, over the %llu a file may have",
                  path, (unsigned long long)st.st_size,
                  (unsigned long long)MAX_FILE_BYTES);
  if (s != PL_OK) {
    pl_error_set_path(err, path);
    close(fd);
    return s;
  }
  *fd_out = fd;
  *size_out = (size_t)st.st_size;
  return PL_OK;
}

pl_status pl_images_read_all(int fd, const char *path, uint8_t *buf,
                             size_t size, pl_error *err) {
  size_t got = 0;
  while (got < size) {
    ssize_t r = read(fd, buf + got, size - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      int e = r < 0 ? errno : 0;
      close(fd);
      pl_errorf(err, PL_IO, "%s: read failed: %s", path,
                e ? strerror(e) : "the file shrank");
      pl_error_set_path(err, path);
      return PL_IO;
    }
    got += (size_t)r;
  }
  close(fd);
  return PL_OK;
}

pl_status pl_images_read_file(const char *path, pl_scratch *sc,
                              uint8_t **out, size_t *n, pl_error *err) {
  int fd;
  size_t size;
  PL_TRY(pl_images_open(path, &fd, &size, err));
  uint8_t *buf = pl_scratch_get(sc, SLOT_FILE, size ? size : 1);
  if (!buf) {
    close(fd);
    return pl_errorf(err, PL_NO_MEMORY, "%s: out of memory", path);
  }
  PL_TRY(pl_images_read_all(fd, path, buf, size, err));
  *out = buf;
  *n = size;
  return PL_OK;
}
