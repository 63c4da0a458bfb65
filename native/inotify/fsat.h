/*
 * Directory-handle-relative filesystem operations (fsat.c) and their N-API bindings
 * (fsat-js.c), registered on the addon's exports by inotify.c's init.
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

/*
 * Removes `name` inside the directory `dir_path` and, when it is a directory, everything below
 * it, relative to open directory handles and never through a symbolic link. 0, or -1 with *fail.
 */
int fsat_remove_tree(const char *dir_path, const char *name, FsatFailure *fail);

/*
 * Creates the missing directories of the absolute `path` (mode 0755 less the umask), each one
 * chowned to uid:gid through its own handle. Stores a directory fd of `path` in *fd_out when
 * fd_out is not NULL. 0, or -1 with *fail.
 */
int fsat_make_dirs(const char *path, uid_t uid, gid_t gid, int *fd_out, FsatFailure *fail);

void register_fsat(napi_env env, napi_value exports);

#endif
