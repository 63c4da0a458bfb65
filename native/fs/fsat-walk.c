/*
 * Path resolution for fsat.c without letting the kernel follow a link: each component is opened
 * with O_NOFOLLOW, and a link is read and its target walked in turn. So the walk knows every link
 * on the way, and who owns it: a link that someone other than root made (a user of the sandbox,
 * possibly racing the request) leads only where the request's user could make the change
 * themselves (fsat_may_write), while root's own links (/var/run, /lib, ...) are followed as named.
 */
#define _GNU_SOURCE
#include "fsat.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_HOPS 40 /* links followed in one walk, as the kernel's limit */

static int walk(int dir, const char *path, FsatWalk *w, const char **rest, int top) {
  int cur = path[0] == '/' ? open("/", O_PATH | O_DIRECTORY | O_CLOEXEC) : fcntl(dir, F_DUPFD_CLOEXEC, 0);
  if (cur < 0) return -1;
  const char *p = path;
  while (*p) {
    while (*p == '/') p++;
    if (!*p) break;
    size_t n = strcspn(p, "/");
    char part[NAME_MAX + 1];
    if (n > NAME_MAX) {
      close(cur);
      errno = ENAMETOOLONG;
      return -1;
    }
    memcpy(part, p, n);
    part[n] = '\0';
    if (top) w->failed_at = (size_t)(p + n - path);
    if (strcmp(part, ".") == 0) {
      p += n;
      continue;
    }
    int next = openat(cur, part, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      int err = errno;
      if (err == ENOENT && rest && top) {
        *rest = p; /* a missing component of the path itself: the caller makes the rest */
        return cur;
      }
      close(cur);
      errno = err;
      return -1;
    }
    struct stat st;
    if (fstat(next, &st) != 0) {
      int err = errno;
      close(next);
      close(cur);
      errno = err;
      return -1;
    }
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t len = ++w->hops > MAX_HOPS ? -1 : readlinkat(next, "", target, sizeof target - 1);
      int err = w->hops > MAX_HOPS ? ELOOP : errno;
      close(next);
      if (len < 0) {
        close(cur);
        errno = err;
        return -1;
      }
      target[len] = '\0';
      if (st.st_uid != 0) w->tainted = 1;
      next = walk(cur, target, w, NULL, 0);
      if (next < 0) {
        err = errno;
        close(cur);
        errno = err;
        return -1;
      }
    } else if (!S_ISDIR(st.st_mode)) {
      close(next);
      close(cur);
      errno = ENOTDIR;
      return -1;
    }
    close(cur);
    cur = next;
    p += n;
  }
  if (rest && top) *rest = p;
  return cur;
}

int fsat_walk(const char *path, FsatWalk *w, const char **rest) {
  memset(w, 0, sizeof *w);
  return walk(AT_FDCWD, path, w, rest, 1);
}

int fsat_may_write(int dir, const FsatUser *user) {
  if (user->uid == 0) return 1;
  struct stat st;
  if (fstat(dir, &st) != 0) return 0;
  mode_t need;
  if (st.st_uid == user->uid) {
    need = S_IWUSR | S_IXUSR;
  } else {
    int member = st.st_gid == user->gid;
    for (size_t k = 0; !member && k < user->ngroups; k++) member = st.st_gid == user->groups[k];
    need = member ? S_IWGRP | S_IXGRP : S_IWOTH | S_IXOTH;
  }
  return (st.st_mode & need) == need;
}

int fsat_may_unlink(int dir, const char *name, const FsatUser *user) {
  if (user->uid == 0) return 1;
  struct stat d, e;
  if (fstat(dir, &d) != 0) return 0;
  if (!(d.st_mode & S_ISVTX) || d.st_uid == user->uid) return 1;
  /* A sticky directory (/tmp): only the entry's owner may remove it. A missing entry is fine. */
  if (fstatat(dir, name, &e, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT;
  return e.st_uid == user->uid;
}
