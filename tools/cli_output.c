/* A command's output files (--order-out, --save-state): checked before the
 * run starts, written to a temporary file in the same directory and renamed
 * over the path only when the run succeeded. So a mistake is reported before
 * any loading, a failed run leaves the old file as it was, and a device, a
 * FIFO or a symbolic link is never replaced by a regular file. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  return "not a plain file";
}

static int refuse(const cli_output *o, const char *why, const char *more) {
  fprintf(stderr, "pinloader: error: %s %s: %s%s\n", o->opt, o->path, why,
          more);
  return 1;
}

/* The directory part of `path` into buf ("." for a bare name). */
static void dir_of(const char *path, char *buf, size_t n) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    snprintf(buf, n, ".");
  else if (slash == path)
    snprintf(buf, n, "/");
  else
    snprintf(buf, n, "%.*s", (int)(slash - path), path);
}

/* Where `path` resolves to: its directory resolved (links and ".."
 * followed) and its last name, which may not exist yet. 0 on success. */
static int resolved(const char *path, char *buf, size_t n) {
  char dir[PATH_MAX], real[PATH_MAX];
  const char *slash = strrchr(path, '/');
  dir_of(path, dir, sizeof dir);
  if (!realpath(dir, real))
    return -1;
  snprintf(buf, n, "%s/%s", strcmp(real, "/") ? real : "",
           slash ? slash + 1 : path);
  return 0;
}

int cli_same_file(const char *a, const char *b) {
  struct stat sa, sb;
  char ra[PATH_MAX + 256], rb[PATH_MAX + 256];
  if (stat(a, &sa) == 0 && stat(b, &sb) == 0) /* hard links too */
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  return resolved(a, ra, sizeof ra) == 0 && resolved(b, rb, sizeof rb) == 0 &&
         !strcmp(ra, rb);
}

/* What is at the path now: nothing, or a regular file (replaced). */
static int check_existing(const cli_output *o) {
  struct stat st;
  if (lstat(o->path, &st) != 0) {
    if (errno == ENOENT)
      return 0;
    return refuse(o, "cannot use it: ", strerror(errno));
  }
  if (S_ISLNK(st.st_mode)) /* a rename would replace the link itself */
    return refuse(o, "is a symbolic link; refusing to replace it (give the "
                     "path of the file it points to)", "");
  if (!S_ISREG(st.st_mode)) {
    fprintf(stderr, "pinloader: error: %s %s: not a regular file (%s); "
                    "refusing to replace it\n", o->opt, o->path,
            kind_of(st.st_mode));
    return 1;
  }
  return 0;
}

int cli_output_open(cli_output *o, const char *opt, const char *path) {
  memset(o, 0, sizeof *o);
  o->opt = opt;
  o->path = path;
  o->fd = -1;
  if (!path)
    return 0;
  if (!*path)
    return refuse(o, "an empty path", "");
  if (check_existing(o))
    return 1;
  /* The temporary file in the same directory: rename(2) is atomic only
   * within one file system. Creating it now tests that the directory is
   * writable before anything is loaded. */
  int n = snprintf(o->tmp, sizeof o->tmp, "%s.tmp%ld", path, (long)getpid());
  if (n < 0 || (size_t)n >= sizeof o->tmp)
    return refuse(o, "path too long", "");
  o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (o->fd < 0) {
    char dir[PATH_MAX];
    int e = errno;
    dir_of(path, dir, sizeof dir);
    fprintf(stderr, "pinloader: error: %s %s: cannot create a file in %s: "
                    "%s\n", opt, path, dir, strerror(e));
    o->tmp[0] = '\0';
    return 1;
  }
  return 0;
}

FILE *cli_output_stream(cli_output *o) {
  if (!o->f && o->fd >= 0) {
    o->f = fdopen(o->fd, "w");
    if (o->f)
      o->fd = -1; /* the stream owns it now */
  }
  return o->f;
}

int cli_output_write(cli_output *o, const void *buf, size_t len) {
  FILE *f = cli_output_stream(o);
  return f && fwrite(buf, 1, len, f) == len ? 0 : -1;
}

int cli_output_commit(cli_output *o) {
  if (!o->path)
    return 0;
  FILE *f = cli_output_stream(o);
  int bad = !f || ferror(f);
  if (f)
    bad |= fclose(f) != 0;
  o->f = NULL;
  if (bad || rename(o->tmp, o->path) != 0) {
    int e = errno;
    unlink(o->tmp);
    o->tmp[0] = '\0';
    return refuse(o, "write failed: ", strerror(e));
  }
  o->tmp[0] = '\0';
  return 0;
}

void cli_output_abort(cli_output *o) {
  if (o->f)
    fclose(o->f);
  if (o->fd >= 0)
    close(o->fd);
  if (o->tmp[0])
    unlink(o->tmp);
  o->f = NULL;
  o->fd = -1;
  o->tmp[0] = '\0';
}
