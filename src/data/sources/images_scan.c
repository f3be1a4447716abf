/* The image source's listing (images_internal.h): torchvision's
 * ImageFolder order (class folders sorted, each walked as
 * sorted(os.walk(followlinks=True)) visits it, files sorted), or a
 * "PATH LABEL" list file, paths relative to the list's folder. */
#include "data/sources/images_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEPTH 32

static pl_status list_add(listing *l, const char *path, int64_t label,
                          pl_error *err) {
  size_t len = strlen(path) + 1;
  if (l->used + len > l->cap) {
    size_t cap = PL_MAX(l->cap * 2, l->used + len + 4096);
    char *p = realloc(l->names, cap);
    if (!p)
      return pl_errorf(err, PL_NO_MEMORY, "out of memory listing images");
    l->names = p, l->cap = cap;
  }
  if (l->n == l->ncap) {
    uint64_t cap = PL_MAX(l->ncap * 2, 1024);
    uint64_t *o = realloc(l->offset, cap * sizeof *o);
    if (o)
      l->offset = o;
    int64_t *b = o ? realloc(l->label, cap * sizeof *b) : NULL;
    if (!b)
      return pl_errorf(err, PL_NO_MEMORY, "out of memory listing images");
    l->label = b, l->ncap = cap;
  }
  memcpy(l->names + l->used, path, len);
  l->offset[l->n] = l->used;
  l->label[l->n++] = label;
  l->used += len;
  return PL_OK;
}

static bool has_image_extension(const char *name) {
  const char *dot = strrchr(name, '.');
  return dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") ||
                 !strcasecmp(dot, ".png"));
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct names {
  char **v;
  size_t n, cap;
} names;

static void names_sort(names *s) {
  if (s->n > 1) /* qsort's base may not be NULL, even for 0 items */
    qsort(s->v, s->n, sizeof *s->v, cmp_str);
}

static void names_free(names *s) {
  for (size_t i = 0; i < s->n; i++)
    free(s->v[i]);
  free(s->v);
  memset(s, 0, sizeof *s);
}

static bool names_add(names *s, const char *a, const char *b) {
  if (s->n == s->cap) {
    size_t cap = PL_MAX(s->cap * 2, 64);
    char **v = realloc(s->v, cap * sizeof *v);
    if (!v)
      return false;
    s->v = v, s->cap = cap;
  }
  size_t la = strlen(a), lb = b ? strlen(b) : 0;
  char *p = malloc(la + lb + 2);
  if (!p)
    return false;
  memcpy(p, a, la);
  if (b) {
    p[la] = '/';
    memcpy(p + la + 1, b, lb + 1);
  } else {
    p[la] = '\0';
  }
  s->v[s->n++] = p;
  return true;
}

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode); /* follows links */
}

/* is_dir() of entry e of a listing, at `path`: from the entry's own type
 * where the file system gives one, as os.scandir does (a stat per file
 * made an ImageNet-sized folder's listing twice as slow as torchvision's);
 * a link or an unknown type is stat()ed, so links to folders are followed. */
static bool entry_is_dir(const struct dirent *e, const char *path) {
  if (e->d_type == DT_DIR)
    return true;
  if (e->d_type != DT_UNKNOWN && e->d_type != DT_LNK)
    return false;
  return is_dir(path);
}

/* The folders directly in dir (links followed), in readdir's order. */
static pl_status sub_dirs(const char *dir, names *subs, pl_error *err) {
  DIR *d = opendir(dir);
  if (!d)
    return pl_errorf(err, PL_IO, "%s: cannot list: %s", dir,
                     strerror(errno));
  pl_status s = PL_OK;
  struct dirent *e;
  while (s == PL_OK && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    if (!names_add(subs, dir, e->d_name))
      s = pl_errorf(err, PL_NO_MEMORY, "out of memory listing images");
    else if (!entry_is_dir(e, subs->v[subs->n - 1]))
      free(subs->v[--subs->n]);
  }
  closedir(d);
  return s;
}

/* Every folder under dir (dir included), as os.walk(followlinks=True). */
static pl_status walk_dirs(const char *dir, int depth, names *dirs,
                           pl_error *err) {
  if (!names_add(dirs, dir, NULL))
    return pl_errorf(err, PL_NO_MEMORY, "out of memory listing images");
  if (depth == MAX_DEPTH)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "%s: folders nest more than %d deep (a link loop?)",
                     dir, MAX_DEPTH);
  names subs = {0};
  pl_status s = sub_dirs(dir, &subs, err);
  for (size_t i = 0; s == PL_OK && i < subs.n; i++)
    s = walk_dirs(subs.v[i], depth + 1, dirs, err);
  names_free(&subs);
  return s;
}

/* The image files directly in dir, sorted. */
static pl_status dir_files(const char *dir, names *files, pl_error *err) {
  DIR *d = opendir(dir);
  if (!d)
    return pl_errorf(err, PL_IO, "%s: cannot list: %s", dir,
                     strerror(errno));
  struct dirent *e;
  pl_status s = PL_OK;
  while (s == PL_OK && (e = readdir(d))) {
    if (!has_image_extension(e->d_name))
      continue;
    if (!names_add(files, dir, e->d_name))
      s = pl_errorf(err, PL_NO_MEMORY, "out of memory listing images");
    else if (entry_is_dir(e, files->v[files->n - 1]))
      free(files->v[--files->n]);
  }
  closedir(d);
  names_sort(files);
  return s;
}

/* One class: files of every folder under it, folders in sorted order (as
 * sorted(os.walk(...)) visits them), files sorted within each. */
static pl_status list_class(listing *l, const char *dir, int64_t label,
                            pl_error *err) {
  names dirs = {0};
  pl_status s = walk_dirs(dir, 0, &dirs, err);
  if (s == PL_OK)
    names_sort(&dirs);
  uint64_t before = l->n;
  for (size_t i = 0; s == PL_OK && i < dirs.n; i++) {
    names files = {0};
    s = dir_files(dirs.v[i], &files, err);
    for (size_t k = 0; s == PL_OK && k < files.n; k++)
      s = list_add(l, files.v[k], label, err);
    names_free(&files);
  }
  names_free(&dirs);
  if (s == PL_OK && l->n == before)
    return pl_errorf(err, PL_FORMAT,
                     "%s: no .jpg, .jpeg or .png files in class folder",
                     dir);
  return s;
}

static pl_status list_folder(listing *l, const char *root, pl_error *err) {
  names classes = {0};
  pl_status s = sub_dirs(root, &classes, err);
  names_sort(&classes);
  if (s == PL_OK && classes.n == 0)
    s = pl_errorf(err, PL_FORMAT,
                  "%s: no class folders (want ROOT/CLASS/IMAGE.jpg)", root);
  for (size_t i = 0; s == PL_OK && i < classes.n; i++)
    s = list_class(l, classes.v[i], (int64_t)i, err);
  names_free(&classes);
  return s;
}

/* "LIST:LINE: why", with the list file as the error's path. */
static pl_status list_error(pl_error *err, const char *list, uint64_t lineno,
                            const char *fmt, ...) PL_PRINTF(4, 5);
static pl_status list_error(pl_error *err, const char *list, uint64_t lineno,
                            const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pl_errorf(err, PL_FORMAT, "%s:%llu: %s", list, (unsigned long long)lineno,
            msg);
  pl_error_set_path(err, list);
  return PL_FORMAT;
}

/* "PATH LABEL" lines; blank lines and '#' comments skipped. */
static pl_status list_line(listing *l, const char *list, const char *dir,
                           char *line, uint64_t lineno, pl_error *err) {
  size_t len = strlen(line);
  while (len && (line[len - 1] == '\r' || line[len - 1] == ' '))
    line[--len] = '\0';
  if (!len || line[0] == '#')
    return PL_OK;
  char *sp = strrchr(line, ' ');
  char *tab = strrchr(line, '\t');
  sp = (!sp || (tab && tab > sp)) ? tab : sp;
  char *end = NULL;
  errno = 0;
  long long label = sp ? strtoll(sp + 1, &end, 10) : 0;
  if (sp && errno == ERANGE) /* strtoll saturates: refuse, do not clamp */
    return list_error(err, list, lineno,
                      "label '%s' does not fit in int64 (at most "
                      "9223372036854775807)",
                      sp + 1);
  if (!sp || sp == line || !end || *end || end == sp + 1 || label < 0)
    return list_error(err, list, lineno,
                      "want 'PATH LABEL' with a label >= 0");
  *sp = '\0';
  if (line[0] == '/')
    return list_add(l, line, label, err);
  char *full = malloc(strlen(dir) + strlen(line) + 2);
  if (!full)
    return pl_errorf(err, PL_NO_MEMORY, "out of memory listing images");
  sprintf(full, "%s/%s", dir, line);
  pl_status s = list_add(l, full, label, err);
  free(full);
  return s;
}

/* The list file for reading, into *out. O_NONBLOCK: a FIFO's open (a
 * root that is not a folder is taken as a list) waits for a writer
 * forever; the type is checked on the descriptor, as read_file does for
 * images. */
static pl_status open_list(const char *list, FILE **out, pl_error *err) {
  int fd = open(list, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  int e = fd < 0 ? errno : fstat(fd, &st) != 0 ? errno : 0;
  pl_status s = PL_OK;
  if (e)
    s = pl_errorf(err, PL_IO, "%s: cannot %s: %s", list,
                  fd < 0 ? "open" : "stat", strerror(e));
  else if (!S_ISREG(st.st_mode))
    s = pl_errorf(err, PL_IO, "%s: not a folder or a list file (a %s)",
                  list, pl_images_file_kind(st.st_mode));
  else if (!(*out = fdopen(fd, "r")))
    s = pl_errorf(err, PL_NO_MEMORY, "%s: cannot open: %s", list,
                  strerror(errno));
  if (s != PL_OK) {
    pl_error_set_path(err, list);
    if (e)
      pl_error_set_errno(err, e);
    if (fd >= 0)
      close(fd);
  }
  return s;
}

static pl_status list_file(listing *l, const char *list, pl_error *err) {
  FILE *f = NULL;
  PL_TRY(open_list(list, &f, err));
  char *dir = strdup(list); /* the list's folder: paths are relative to it */
  char *slash = dir ? strrchr(dir, '/') : NULL;
  if (dir && !slash)
    strcpy(dir, ".");
  else if (slash)
    slash[slash == dir] = '\0';
  char *line = NULL;
  size_t cap = 0;
  uint64_t no = 0;
  pl_status s = dir ? PL_OK : pl_errorf(err, PL_NO_MEMORY, "out of memory");
  while (s == PL_OK && getline(&line, &cap, f) >= 0) {
    no++;
    line[strcspn(line, "\n")] = '\0';
    s = list_line(l, list, dir, line, no, err);
  }
  free(line);
  free(dir);
  fclose(f);
  if (s == PL_OK && l->n == 0)
    s = pl_errorf(err, PL_FORMAT, "%s: the list names no images", list);
  return s;
}

pl_status pl_images_list(const char *root_or_list, bool is_dir, listing *l,
                         pl_error *err) {
  return is_dir ? list_folder(l, root_or_list, err)
                : list_file(l, root_or_list, err);
}
