/*
 * N-API bindings of fsat.c: each call queues its walk on libuv's worker pool (napi async work)
 * and returns a promise, so a big tree never blocks the event loop. Failures reject with an
 * Error carrying code (errno name), errno, syscall and path, like Node's own fs errors.
 */
#define _GNU_SOURCE
#include "fsat.h"
#include <uv.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum { OP_REMOVE_TREE, OP_MAKE_DIRS, OP_RENAME_AT } Op;

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  Op op;
  char *a, *b, *c;
  FsatUser user;
  int fd;    /* renameAt: the destination directory; makeDirs: the result (-1 unless kept) */
  int keep;  /* makeDirs: return the final directory's fd */
  int rc;
  FsatFailure fail;
} Job;

static void execute(napi_env env, void *data) {
  (void)env;
  Job *job = data;
  switch (job->op) {
    case OP_REMOVE_TREE:
      job->rc = fsat_remove_tree(job->a, job->b, &job->user, &job->fail);
      break;
    case OP_MAKE_DIRS:
      job->rc = fsat_make_dirs(job->a, &job->user, job->keep ? &job->fd : NULL, &job->fail);
      break;
    case OP_RENAME_AT:
      job->rc = fsat_rename_from(job->a, job->c, job->fd, job->b, &job->user, &job->fail);
      break;
  }
}

static napi_value make_error(napi_env env, const FsatFailure *f) {
  char msg[4200];
  napi_value code, message, error, v;
  const char *path = f->path ? f->path : "";
  /* Worded as Node's fs errors are ("ENOENT: no such file or directory, open '/x'"). */
  snprintf(msg, sizeof msg, "%s: %s, %s '%s'", uv_err_name(-f->err), uv_strerror(-f->err), f->syscall ? f->syscall : "?", path);
  napi_create_string_utf8(env, uv_err_name(-f->err), NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &message);
  napi_create_error(env, code, message, &error);
  napi_create_int32(env, -f->err, &v);
  napi_set_named_property(env, error, "errno", v);
  napi_create_string_utf8(env, f->syscall ? f->syscall : "", NAPI_AUTO_LENGTH, &v);
  napi_set_named_property(env, error, "syscall", v);
  napi_create_string_utf8(env, path, NAPI_AUTO_LENGTH, &v);
  napi_set_named_property(env, error, "path", v);
  return error;
}

static void complete(napi_env env, napi_status status, void *data) {
  Job *job = data;
  napi_value result;
  if (status != napi_ok) {
    FsatFailure f = {.err = ECANCELED, .syscall = "queue"};
    napi_reject_deferred(env, job->deferred, make_error(env, &f));
  } else if (job->rc != 0) {
    napi_reject_deferred(env, job->deferred, make_error(env, &job->fail));
  } else {
    if (job->op == OP_MAKE_DIRS) napi_create_int32(env, job->keep ? job->fd : -1, &result);
    else napi_get_undefined(env, &result);
    napi_resolve_deferred(env, job->deferred, result);
  }
  napi_delete_async_work(env, job->work);
  free(job->fail.path);
  free(job->user.groups);
  free(job->a);
  free(job->b);
  free(job->c);
  free(job);
}

static char *get_string(napi_env env, napi_value v) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok) return NULL;
  char *s = malloc(len + 1);
  if (s) napi_get_value_string_utf8(env, v, s, len + 1, &len);
  if (s && strlen(s) != len) { /* an embedded NUL would silently cut the path */
    free(s);
    return NULL;
  }
  return s;
}

/* A single directory entry name: not empty, no slash, not "." or "..". */
static int valid_name(const char *s) {
  return s && *s && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

/* A user or group id: an integer in 0 .. 2^32-2 (2^32-1 is "no change" to chown). */
static int get_id(napi_env env, napi_value v, uint32_t *out) {
  double d;
  if (napi_get_value_double(env, v, &d) != napi_ok || d != (double)(int64_t)d || d < 0 || d > 4294967294.0) return 0;
  *out = (uint32_t)d;
  return 1;
}

/* The request's user from (uid, gid, groups: number[]); false (nothing allocated) when malformed. */
static int get_user(napi_env env, napi_value uid, napi_value gid, napi_value groups, FsatUser *out) {
  uint32_t u, g, n = 0;
  bool is_array = false;
  if (!get_id(env, uid, &u) || !get_id(env, gid, &g)) return 0;
  if (napi_is_array(env, groups, &is_array) != napi_ok || !is_array || napi_get_array_length(env, groups, &n) != napi_ok || n > 65536) return 0;
  gid_t *list = calloc(n ? n : 1, sizeof *list);
  if (!list) return 0;
  for (uint32_t k = 0; k < n; k++) {
    napi_value v;
    uint32_t id;
    if (napi_get_element(env, groups, k, &v) != napi_ok || !get_id(env, v, &id)) {
      free(list);
      return 0;
    }
    list[k] = id;
  }
  *out = (FsatUser){.uid = u, .gid = g, .groups = list, .ngroups = n};
  return 1;
}

static napi_value queue(napi_env env, Job *job, const char *name) {
  napi_value promise, resource;
  if (napi_create_promise(env, &job->deferred, &promise) != napi_ok) goto fail;
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &resource);
  if (napi_create_async_work(env, NULL, resource, execute, complete, job, &job->work) != napi_ok) goto fail;
  if (napi_queue_async_work(env, job->work) != napi_ok) goto fail;
  return promise;
fail:
  free(job->user.groups);
  free(job->a);
  free(job->b);
  free(job->c);
  free(job);
  napi_throw_error(env, NULL, "could not queue filesystem work");
  return NULL;
}

static Job *new_job(napi_env env, Op op, napi_value a, napi_value b) {
  Job *job = calloc(1, sizeof *job);
  if (!job) {
    napi_throw_error(env, "ENOMEM", "out of memory");
    return NULL;
  }
  job->op = op;
  job->fd = -1;
  job->a = get_string(env, a);
  job->b = b ? get_string(env, b) : NULL;
  if (!job->a || (b && !job->b)) {
    free(job->a);
    free(job->b);
    free(job);
    napi_throw_type_error(env, NULL, "expected strings without NUL bytes");
    return NULL;
  }
  return job;
}

/* removeTree(dir, name, uid, gid, groups): Promise<void>; a missing entry (or dir) is success. */
static napi_value js_remove_tree(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  FsatUser user;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 5 || !get_user(env, argv[2], argv[3], argv[4], &user)) {
    napi_throw_type_error(env, NULL, "removeTree(dir: string, name: string, uid: number, gid: number, groups: number[])");
    return NULL;
  }
  Job *job = new_job(env, OP_REMOVE_TREE, argv[0], argv[1]);
  if (!job) {
    free(user.groups);
    return NULL;
  }
  job->user = user;
  if (!valid_name(job->b)) {
    free(job->user.groups);
    free(job->a);
    free(job->b);
    free(job);
    napi_throw_type_error(env, NULL, "removeTree: name must be one entry name (no '/', not '.' or '..')");
    return NULL;
  }
  return queue(env, job, "envd:removeTree");
}

/* makeDirs(path, uid, gid, groups, keepFd): Promise<number>, the final directory's fd when keepFd, else -1. */
static napi_value js_make_dirs(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  FsatUser user;
  bool keep = false;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 5 || napi_get_value_bool(env, argv[4], &keep) != napi_ok || !get_user(env, argv[1], argv[2], argv[3], &user)) {
    napi_throw_type_error(env, NULL, "makeDirs(path: string, uid: number, gid: number, groups: number[], keepFd: boolean) with ids in 0..2^32-2");
    return NULL;
  }
  Job *job = new_job(env, OP_MAKE_DIRS, argv[0], NULL);
  if (!job) {
    free(user.groups);
    return NULL;
  }
  job->user = user;
  if (job->a[0] != '/') {
    free(job->user.groups);
    free(job->a);
    free(job);
    napi_throw_type_error(env, NULL, "makeDirs: path must be absolute");
    return NULL;
  }
  job->keep = keep;
  return queue(env, job, "envd:makeDirs");
}

/* renameAt(sourceDir, sourceName, dirFd, name, uid, gid, groups): Promise<void>; rename(2) into the open directory. */
static napi_value js_rename_at(napi_env env, napi_callback_info info) {
  size_t argc = 7;
  napi_value argv[7];
  int32_t fd = -1;
  FsatUser user;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 7 || napi_get_value_int32(env, argv[2], &fd) != napi_ok || fd < 0 || !get_user(env, argv[4], argv[5], argv[6], &user)) {
    napi_throw_type_error(env, NULL, "renameAt(sourceDir: string, sourceName: string, dirFd: number, name: string, uid: number, gid: number, groups: number[])");
    return NULL;
  }
  Job *job = new_job(env, OP_RENAME_AT, argv[0], argv[3]);
  if (!job) {
    free(user.groups);
    return NULL;
  }
  job->user = user;
  job->c = get_string(env, argv[1]);
  if (!valid_name(job->b) || !valid_name(job->c)) {
    free(job->user.groups);
    free(job->a);
    free(job->b);
    free(job->c);
    free(job);
    napi_throw_type_error(env, NULL, "renameAt: names must be one entry name each (no '/', not '.' or '..')");
    return NULL;
  }
  job->fd = fd;
  return queue(env, job, "envd:renameAt");
}

void register_fsat(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "removeTree", NAPI_AUTO_LENGTH, js_remove_tree, NULL, &fn);
  napi_set_named_property(env, exports, "removeTree", fn);
  napi_create_function(env, "makeDirs", NAPI_AUTO_LENGTH, js_make_dirs, NULL, &fn);
  napi_set_named_property(env, exports, "makeDirs", fn);
  napi_create_function(env, "renameAt", NAPI_AUTO_LENGTH, js_rename_at, NULL, &fn);
  napi_set_named_property(env, exports, "renameAt", fn);
}
