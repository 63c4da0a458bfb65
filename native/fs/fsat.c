/*
 * Filesystem work envd does as root on behalf of an unprivileged user, done relative to open
 * directory handles so that a user racing it cannot redirect it through a symbolic link.
 *
 * Why: removing or creating by path re-resolves the path at every step. A user who owns a
 * directory in that path can swap it, between two steps, for a link to a root-owned directory,
 * and a path-based `rm -r` then deletes root's files, a path-based `chown` after `mkdir` chowns
 * root's file. Here every step names one entry inside a directory we hold open (unlinkat,
 * openat with O_NOFOLLOW, mkdirat of a directory born the user's), as the Go reference's
 * os.RemoveAll does. Node has no *at calls, and no maintained npm package does this walk.
 *
 * Both walks run on a libuv worker thread (fsat-js.c): nothing here touches N-API.
 */
#define _GNU_SOURCE
#include "fsat.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BATCH 128        /* names read from a directory before removing them */
#define MAX_DEPTH 2048   /* levels below the removed one (one open fd each): any tree a PATH_MAX path reaches */
#define SWAP_RETRIES 16  /* times an entry may change type under us before we give up */

#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)

typedef struct {
  int fd;
  char *name;   /* its name in the directory above */
  char **names; /* the batch being removed */
  size_t n, i;
  int last_batch; /* the batch in `names` ended the directory */
} Frame;

static char *join(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  char *out = malloc(la + lb + 2);
  if (!out) return NULL;
  memcpy(out, a, la);
  size_t at = la;
  if (at == 0 || out[at - 1] != '/') out[at++] = '/';
  memcpy(out + at, b, lb + 1);
  return out;
}

static int fail_at(FsatFailure *fail, int err, const char *syscall, const char *base, Frame *stack, int top, const char *name) {
  char *path = strdup(base);
  for (int k = 0; path && k <= top; k++) {
    char *next = join(path, stack[k].name);
    free(path);
    path = next;
  }
  if (path && name) {
    char *next = join(path, name);
    free(path);
    path = next;
  }
  fail->err = err;
  fail->syscall = syscall;
  fail->path = path;
  return -1;
}

static void free_names(Frame *f) {
  for (size_t k = 0; k < f->n; k++) free(f->names[k]);
  free(f->names);
  f->names = NULL;
  f->n = f->i = 0;
}

/*
 * Removes `name` in `dir` if it is not a directory or is an empty one; if it is a non-empty
 * directory, opens it (never through a link) into *fd. 0 gone, 1 opened, or -errno. An entry
 * swapped between the calls (a directory for a link) is looked at again.
 */
static int remove_or_open(int dir, const char *name, int *fd, const char **syscall) {
  for (int tries = 0; tries < SWAP_RETRIES; tries++) {
    *syscall = "unlinkat";
    if (unlinkat(dir, name, 0) == 0 || errno == ENOENT) return 0;
    if (errno != EISDIR && errno != EPERM) return -errno;
    int unlink_err = errno;
    if (unlinkat(dir, name, AT_REMOVEDIR) == 0 || errno == ENOENT) return 0;
    if (errno == ENOTDIR) {
      if (unlink_err == EPERM) return -EPERM; /* a file we may not unlink */
      continue;
    }
    if (errno != ENOTEMPTY && errno != EEXIST) return -errno;
    *syscall = "openat";
    *fd = openat(dir, name, DIR_FLAGS);
    if (*fd >= 0) return 1;
    if (errno == ENOENT) return 0;
    if (errno != ENOTDIR && errno != ELOOP) return -errno;
  }
  *syscall = "unlinkat";
  return -EAGAIN;
}

/* Reads the next batch of names of f's directory from its start (removed entries are gone). */
static int read_batch(Frame *f) {
  free_names(f);
  f->names = calloc(BATCH, sizeof *f->names);
  int dfd = f->names ? openat(f->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  if (dfd < 0) return f->names ? -errno : -ENOMEM;
  DIR *d = fdopendir(dfd);
  if (!d) {
    int err = errno;
    close(dfd);
    return -err;
  }
  int err = 0;
  struct dirent *de;
  while (f->n < BATCH) {
    errno = 0;
    if (!(de = readdir(d))) {
      err = errno;
      break;
    }
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    if (!(f->names[f->n] = strdup(de->d_name))) {
      err = ENOMEM;
      break;
    }
    f->n++;
  }
  closedir(d);
  f->last_batch = f->n < BATCH;
  return err ? -err : 0;
}

int fsat_remove_tree(const char *dir_path, const char *name, const FsatUser *user, FsatFailure *fail) {
  FsatWalk w;
  int root = fsat_walk(dir_path, &w, NULL);
  if (root < 0) {
    if (errno == ENOENT) return 0; /* a missing path is success */
    return fail_at(fail, errno, "open", dir_path, NULL, -1, NULL);
  }
  if (w.tainted && (!fsat_may_write(root, user) || !fsat_may_unlink(root, name, user))) {
    close(root);
    return fail_at(fail, EACCES, "walk", dir_path, NULL, -1, NULL);
  }
  Frame *stack = calloc(MAX_DEPTH + 1, sizeof *stack);
  if (!stack) {
    close(root);
    return fail_at(fail, ENOMEM, "calloc", dir_path, NULL, -1, name);
  }
  const char *syscall = NULL;
  int fd = -1, top = -1, rc = 0;
  int r = remove_or_open(root, name, &fd, &syscall);
  if (r < 0) rc = fail_at(fail, -r, syscall, dir_path, stack, top, name);
  else if (r == 1) stack[++top] = (Frame){.fd = fd, .name = strdup(name)};
  while (rc == 0 && top >= 0) {
    Frame *f = &stack[top];
    if (!f->name) {
      rc = fail_at(fail, ENOMEM, "strdup", dir_path, stack, top - 1, NULL);
    } else if (f->i < f->n) {
      const char *child = f->names[f->i++];
      r = remove_or_open(f->fd, child, &fd, &syscall);
      if (r < 0) {
        rc = fail_at(fail, -r, syscall, dir_path, stack, top, child);
      } else if (r == 1 && top + 1 >= MAX_DEPTH) {
        close(fd);
        rc = fail_at(fail, ENAMETOOLONG, "openat", dir_path, stack, top, child);
      } else if (r == 1) {
        stack[++top] = (Frame){.fd = fd, .name = strdup(child)};
      }
    } else if (!f->names || !f->last_batch) {
      if ((r = read_batch(f)) < 0) rc = fail_at(fail, -r, "readdir", dir_path, stack, top, NULL);
    } else {
      int parent = top > 0 ? stack[top - 1].fd : root;
      if (unlinkat(parent, f->name, AT_REMOVEDIR) != 0 && errno != ENOENT) {
        rc = fail_at(fail, errno, "unlinkat", dir_path, stack, top, NULL);
        break;
      }
      close(f->fd);
      free_names(f);
      free(f->name);
      top--;
    }
  }
  for (; top >= 0; top--) {
    close(stack[top].fd);
    free_names(&stack[top]);
    free(stack[top].name);
  }
  free(stack);
  close(root);
  return rc;
}

int fsat_make_dirs(const char *path, const FsatUser *user, int *fd_out, FsatFailure *fail) {
  FsatWalk w;
  const char *rest = "";
  int cur = fsat_walk(path, &w, &rest), rc = 0;
  if (cur < 0) {
    int err = errno;
    char *at = strndup(path, w.failed_at);
    rc = fail_at(fail, err, "openat", at ? at : path, NULL, -1, NULL);
    free(at);
    return rc;
  }
  size_t plen = (size_t)(rest - path);
  while (plen > 0 && path[plen - 1] == '/') plen--;
  char *copy = strdup(rest), *prefix = malloc(strlen(path) + 2);
  if (!copy || !prefix) {
    free(copy);
    free(prefix);
    close(cur);
    return fail_at(fail, ENOMEM, "strdup", path, NULL, -1, NULL);
  }
  memcpy(prefix, path, plen);
  prefix[plen] = '\0';
  /* Existing directories are taken as the request names them, links included; past another
     user's link, only where the request's user could create (or, for a kept fd, rename) too. */
  if (w.tainted && (*rest || fd_out) && !fsat_may_write(cur, user)) rc = fail_at(fail, EACCES, "walk", prefix, NULL, -1, NULL);
  char *save = NULL;
  for (char *part = strtok_r(copy, "/", &save); rc == 0 && part; part = strtok_r(NULL, "/", &save)) {
    size_t n = strlen(part);
    prefix[plen++] = '/';
    memcpy(prefix + plen, part, n + 1);
    plen += n;
    /* Born the user's (fsat-born.c): nothing made here is ever chowned, so nothing can be
       swapped in to be chowned instead. A directory someone else made meanwhile is kept as is. */
    if (fsat_mkdir_as(cur, part, 0755, user) != 0 && errno != EEXIST) {
      rc = fail_at(fail, errno, "mkdirat", prefix, NULL, -1, NULL);
      break;
    }
    int next = openat(cur, part, DIR_FLAGS);
    if (next < 0) {
      rc = fail_at(fail, errno, "openat", prefix, NULL, -1, NULL);
      break;
    }
    close(cur);
    cur = next;
  }
  free(copy);
  free(prefix);
  if (rc == 0 && fd_out) *fd_out = cur;
  else close(cur);
  return rc;
}

int fsat_rename_from(const char *src_dir, const char *src_name, int dst_dir, const char *dst_name, const FsatUser *user, FsatFailure *fail) {
  FsatWalk w;
  int src = fsat_walk(src_dir, &w, NULL);
  if (src < 0) return fail_at(fail, errno, "rename", src_dir, NULL, -1, src_name);
  if (w.tainted && (!fsat_may_write(src, user) || !fsat_may_unlink(src, src_name, user))) {
    close(src);
    return fail_at(fail, EACCES, "walk", src_dir, NULL, -1, NULL);
  }
  int rc = renameat(src, src_name, dst_dir, dst_name), err = errno;
  close(src);
  return rc == 0 ? 0 : fail_at(fail, err, "rename", src_dir, NULL, -1, src_name);
}
