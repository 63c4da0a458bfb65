/*
 * asUser(): one filesystem call (open, mkdir -p, rename, unlink) made with a request user's
 * filesystem credentials, so that the kernel checks permissions and follows symbolic links
 * exactly as it would for that user, and what it creates belongs to that user. envd runs as root
 * and acts for the request's user; checking permissions in JavaScript before a path-based call
 * cannot close the window in which the user swaps a path component for a link.
 *
 * The call runs as napi async work on a libuv pool thread, which switches its supplementary
 * groups, fsgid and fsuid through raw system calls (per thread; glibc's wrappers would change
 * every thread of the daemon), makes the call and switches back before taking other work. A
 * pool thread runs one work item at a time, so nothing else ever runs with the user's ids. (A
 * fresh thread per call, which never switches back, measured 2-3x slower per call: 0.1-0.17 ms
 * against 0.05 ms, several calls per upload.) Setting a non-zero fsuid also drops the thread's
 * filesystem capabilities (CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_CHOWN...), as for a real process of
 * that user; setting it back to 0 restores them.
 *
 * Results are numbers: an fd (open, close-on-exec always) or 0, else -errno; mkdir -p also gives
 * the length of the path prefix it failed on, so the caller can name the directory, and whether
 * the call that failed was mkdirat itself (the user could look into the directory but not create
 * there) rather than a lookup on the way.
 */
#define _GNU_SOURCE
#include <node_api.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "asuser.h"

#define MAX_GROUPS 256

enum { OP_OPEN = 0, OP_MKDIRS = 1, OP_RENAME = 2, OP_UNLINK = 3 };

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  int op;
  uint32_t uid;
  uint32_t gid;
  int ngroups;
  gid_t groups[MAX_GROUPS];
  char *path;
  char *path2;
  int flags;
  uint32_t mode;
  long result; /* fd or 0; -errno on failure */
  long at;     /* mkdir -p: length of the prefix that failed */
  int in_mkdir; /* mkdir -p: the failing call was mkdirat (the directory was reached) */
} Req;

/* Takes on the user's groups, fsgid and fsuid for this thread only; 0 or an errno. */
static int become(const Req *q) {
  if (syscall(SYS_setgroups, (size_t)q->ngroups, q->groups) != 0) return errno;
  syscall(SYS_setfsgid, (gid_t)q->gid);
  /* setfsgid/setfsuid report no error: an invalid id (-1) changes nothing and returns the current one. */
  if ((uint32_t)syscall(SYS_setfsgid, (gid_t)-1) != q->gid) return EPERM;
  syscall(SYS_setfsuid, (uid_t)q->uid);
  if ((uint32_t)syscall(SYS_setfsuid, (uid_t)-1) != q->uid) return EPERM;
  return 0;
}

/* Every missing directory of an absolute, normalised path, mode 0755, each looked up as the user. */
static void mkdirs(Req *q) {
  const char *p = q->path;
  int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) {
    q->result = -errno;
    return;
  }
  const char *s = p;
  while (*s == '/') s++;
  while (*s) {
    const char *e = strchr(s, '/');
    size_t len = e ? (size_t)(e - s) : strlen(s);
    char name[NAME_MAX + 1];
    int next = -1;
    if (len > NAME_MAX) {
      errno = ENAMETOOLONG;
    } else {
      memcpy(name, s, len);
      name[len] = 0;
      next = openat(dir, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (next < 0 && errno == ENOENT) {
        if (mkdirat(dir, name, 0755) == 0 || errno == EEXIST) next = openat(dir, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
        else q->in_mkdir = 1;
      }
    }
    if (next < 0) {
      q->result = -errno;
      q->at = (long)(s + len - p);
      close(dir);
      return;
    }
    close(dir);
    dir = next;
    s += len;
    while (*s == '/') s++;
  }
  close(dir);
  q->result = 0;
}

static void run(Req *q) {
  int err = become(q);
  if (err) {
    q->result = -err;
    return;
  }
  long r = 0;
  switch (q->op) {
    case OP_OPEN:
      r = open(q->path, q->flags | O_CLOEXEC, (mode_t)q->mode);
      break;
    case OP_MKDIRS:
      mkdirs(q);
      return;
    case OP_RENAME:
      r = rename(q->path, q->path2);
      break;
    case OP_UNLINK:
      r = unlink(q->path);
      break;
    default:
      errno = EINVAL;
      r = -1;
  }
  q->result = r < 0 ? -errno : r;
}

static void execute(napi_env env, void *data) {
  (void)env;
  Req *q = data;
  gid_t groups[MAX_GROUPS];
  long ngroups = syscall(SYS_getgroups, MAX_GROUPS, groups);
  uint32_t fsuid = (uint32_t)syscall(SYS_setfsuid, (uid_t)-1);
  uint32_t fsgid = (uint32_t)syscall(SYS_setfsgid, (gid_t)-1);
  if (ngroups < 0) {
    q->result = -errno;
    return;
  }
  run(q);
  /* Back to the daemon's own ids before this pool thread takes other work. Root (CAP_SETUID and
   * CAP_SETGID are not filesystem capabilities, so the switch kept them) cannot fail here; if it
   * ever did, stopping the daemon beats running anything else with a user's ids. */
  syscall(SYS_setfsuid, (uid_t)fsuid);
  if ((uint32_t)syscall(SYS_setfsuid, (uid_t)-1) != fsuid) abort();
  syscall(SYS_setfsgid, (gid_t)fsgid);
  if ((uint32_t)syscall(SYS_setfsgid, (gid_t)-1) != fsgid) abort();
  if (syscall(SYS_setgroups, (size_t)ngroups, groups) != 0) abort();
}

static void complete(napi_env env, napi_status status, void *data) {
  Req *q = data;
  napi_value out, v;
  if (status != napi_ok && q->result >= 0) {
    if (q->op == OP_OPEN && q->result > 0) close((int)q->result);
    q->result = -ECANCELED;
  }
  napi_create_array_with_length(env, 3, &out);
  napi_create_int64(env, q->result, &v);
  napi_set_element(env, out, 0, v);
  napi_create_int64(env, q->at, &v);
  napi_set_element(env, out, 1, v);
  napi_get_boolean(env, q->result < 0 && q->in_mkdir, &v);
  napi_set_element(env, out, 2, v);
  napi_resolve_deferred(env, q->deferred, out);
  napi_delete_async_work(env, q->work);
  free(q->path);
  free(q->path2);
  free(q);
}

static char *string_arg(napi_env env, napi_value v) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok) return NULL;
  char *s = malloc(len + 1);
  if (!s) return NULL;
  napi_get_value_string_utf8(env, v, s, len + 1, &len);
  if (strlen(s) != len) { /* an embedded NUL would name another file */
    free(s);
    return NULL;
  }
  return s;
}

/* asUser(op, uid, gid, groups, path, path2, flags, mode) → Promise<[result, at, inMkdir]>. */
static napi_value js_as_user(napi_env env, napi_callback_info info) {
  size_t argc = 8;
  napi_value argv[8], promise, name;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 8) {
    napi_throw_type_error(env, NULL, "asUser: 8 arguments expected");
    return NULL;
  }
  Req *q = calloc(1, sizeof *q);
  if (!q) {
    napi_throw_error(env, "ENOMEM", "asUser: out of memory");
    return NULL;
  }
  int32_t op = -1, flags = 0;
  uint32_t ngroups = 0;
  bool is_array = false;
  napi_get_value_int32(env, argv[0], &op);
  napi_get_value_int32(env, argv[6], &flags);
  napi_is_array(env, argv[3], &is_array);
  if (is_array) napi_get_array_length(env, argv[3], &ngroups);
  int ok = op >= OP_OPEN && op <= OP_UNLINK && is_array && ngroups <= MAX_GROUPS &&
           napi_get_value_uint32(env, argv[1], &q->uid) == napi_ok &&
           napi_get_value_uint32(env, argv[2], &q->gid) == napi_ok &&
           napi_get_value_uint32(env, argv[7], &q->mode) == napi_ok;
  for (uint32_t i = 0; ok && i < ngroups; i++) {
    napi_value g;
    uint32_t gid = 0;
    ok = napi_get_element(env, argv[3], i, &g) == napi_ok && napi_get_value_uint32(env, g, &gid) == napi_ok;
    q->groups[i] = gid;
  }
  q->ngroups = (int)ngroups;
  q->op = op;
  q->flags = flags;
  if (ok) q->path = string_arg(env, argv[4]);
  if (ok && q->path && op == OP_RENAME) q->path2 = string_arg(env, argv[5]);
  if (!ok || !q->path || (op == OP_RENAME && !q->path2)) {
    free(q->path);
    free(q->path2);
    free(q);
    napi_throw_type_error(env, NULL, "asUser: invalid arguments");
    return NULL;
  }
  napi_create_promise(env, &q->deferred, &promise);
  napi_create_string_utf8(env, "envd:asUser", NAPI_AUTO_LENGTH, &name);
  napi_create_async_work(env, NULL, name, execute, complete, q, &q->work);
  napi_queue_async_work(env, q->work);
  return promise;
}

void register_asuser(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "asUser", NAPI_AUTO_LENGTH, js_as_user, NULL, &fn);
  napi_set_named_property(env, exports, "asUser", fn);
}
