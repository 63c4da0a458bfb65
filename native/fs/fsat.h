/*
 * Directory-handle-relative filesystem operations (fsat.c) and their N-API bindings
 * (fsat-js.c), registered on the addon's exports by native/addon/init.c.
 */
#ifndef ENVD_FSAT_H
#define ENVD_FSAT_H
#include <node_api.h>
#include <sys/types.h>

/* Where an operation failed: the errno, the syscall, and the path it was working on (malloc'd). */
typedef struct {
  int err;
  const char *syscall;
  char *path;
} FsatFailure;

/* The request's user: a link someone other than root made leads only where this user may write. */
typedef struct {
  uid_t uid;
  gid_t gid;
  gid_t *groups;
  size_t ngroups;
} FsatUser;

/* What a walk met: links followed, and whether one of them was not root's. */
typedef struct {
  int hops;
  int tainted;
  size_t failed_at; /* the end, in the walked path, of the component being opened */
} FsatWalk;

/*
 * Opens the absolute `path` as a directory (an O_PATH fd), following links by reading them, never
 * through the kernel. With `rest` non-NULL, the walk stops at the first missing component of
 * `path` itself and *rest points at it ("" when everything exists). -1 with errno on failure.
 */
int fsat_walk(const char *path, FsatWalk *w, const char **rest);

/* Whether `user` may add and remove entries in the directory `dir` (write and search bits; root may). */
int fsat_may_write(int dir, const FsatUser *user);

/* Whether `user` may remove the entry `name` of `dir` as far as a sticky bit goes (root may). */
int fsat_may_unlink(int dir, const char *name, const FsatUser *user);

/*
 * Removes `name` inside the directory `dir_path` and, when it is a directory, everything below
 * it, relative to open directory handles and never through a symbolic link. 0, or -1 with *fail.
 */
int fsat_remove_tree(const char *dir_path, const char *name, const FsatUser *user, FsatFailure *fail);

/*
 * Creates the missing directories of the absolute `path` (mode 0755 less the umask), each one
 * born the user's (fsat_mkdir_as) and opened without following a link; where a link of another
 * user's led, only if the user may write there (else EACCES, syscall "walk"). Stores a directory
 * fd of `path` in *fd_out when fd_out is not NULL. 0, or -1 with *fail.
 */
int fsat_make_dirs(const char *path, const FsatUser *user, int *fd_out, FsatFailure *fail);

/*
 * rename(2) of the entry `src_name` of the directory `src_dir` to `dst_name` in the open
 * directory `dst_dir`. A `src_dir` reached through another user's link must be one `user` may
 * write (and, if sticky, the entry theirs). 0, or -1 with *fail.
 */
int fsat_rename_from(const char *src_dir, const char *src_name, int dst_dir, const char *dst_name, const FsatUser *user, FsatFailure *fail);

/*
 * mkdirat(2) of `name` in `dir` by root, the new directory belonging to the user from the start
 * (fsat-born.c). 0, or -1 with errno.
 */
int fsat_mkdir_as(int dir, const char *name, mode_t mode, const FsatUser *user);

void register_fsat(napi_env env, napi_value exports);

#endif
