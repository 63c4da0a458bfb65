/*
 * Minimal N-API binding to Linux inotify for envd's filesystem watchers.
 *
 * Why our own addon: chokidar (and fs.watch) cannot tell a rename from a remove nor report a
 * chmod distinctly, and the npm `inotify` package does not build on Node 20. This file only
 * wraps the syscalls; all policy (recursion, event mapping, buffering) lives in TypeScript.
 *
 * Design: one non-blocking inotify fd per instance, watched with a libuv poll handle on the
 * main loop (no threads, no locks). When the fd becomes readable, JS is told so and pulls the
 * raw event bytes with read(); the same read() lets JS flush pending events synchronously.
 */
#define _GNU_SOURCE
#include <node_api.h>
#include <uv.h>
#include "addon.h"
#include <sys/inotify.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_CHUNK 65536
#define READ_LIMIT (1024 * 1024)

typedef struct {
  uv_poll_t poll;
  int fd;
  int closed;          /* close() was called: the poll handle is closing or closed */
  int handle_closed;   /* libuv finished closing the poll handle; fd is closed */
  int finalized;       /* the JS external was garbage collected */
  napi_env env;
  napi_ref callback;
  napi_async_context async;
} Instance;


static void maybe_free(Instance *inst) {
  if (inst->handle_closed && inst->finalized) free(inst);
}

static void on_handle_closed(uv_handle_t *handle) {
  Instance *inst = (Instance *)handle->data;
  close(inst->fd);
  inst->handle_closed = 1;
  maybe_free(inst);
}

static void on_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  Instance *inst = (Instance *)data;
  inst->finalized = 1;
  maybe_free(inst);
}

/* Tells JS that the fd is readable (status 0) or failed (a negative libuv status). */
static void on_readable(uv_poll_t *handle, int status, int events) {
  (void)events;
  Instance *inst = (Instance *)handle->data;
  if (inst->closed) return;
  napi_env env = inst->env;
  napi_handle_scope scope;
  napi_value cb, recv, arg, result;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  napi_get_reference_value(env, inst->callback, &cb);
  napi_get_global(env, &recv);
  napi_create_int32(env, status, &arg);
  if (napi_make_callback(env, inst->async, recv, cb, 1, &arg, &result) == napi_pending_exception) {
    napi_value exc;
    napi_get_and_clear_last_exception(env, &exc);
    napi_fatal_exception(env, exc);
  }
  napi_close_handle_scope(env, scope);
}

static Instance *get_instance(napi_env env, napi_value value) {
  void *data = NULL;
  if (napi_get_value_external(env, value, &data) != napi_ok || data == NULL) {
    napi_throw_type_error(env, NULL, "expected an inotify handle");
    return NULL;
  }
  Instance *inst = (Instance *)data;
  if (inst->closed) {
    napi_throw_error(env, "EBADF", "inotify handle is closed");
    return NULL;
  }
  return inst;
}

/* open(onReadable: (status: number) => void): handle */
static napi_value js_open(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], handle, name;
  napi_valuetype type;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || napi_typeof(env, argv[0], &type) != napi_ok || type != napi_function) {
    napi_throw_type_error(env, NULL, "open(callback) needs a function");
    return NULL;
  }
  uv_loop_t *loop;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok) {
    napi_throw_error(env, NULL, "no event loop");
    return NULL;
  }
  int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return addon_throw_errno(env, errno, "inotify_init1");
  Instance *inst = calloc(1, sizeof *inst);
  if (!inst) {
    close(fd);
    return addon_throw_errno(env, ENOMEM, "calloc");
  }
  inst->fd = fd;
  inst->env = env;
  int rc = uv_poll_init(loop, &inst->poll, fd);
  if (rc < 0) {
    close(fd);
    free(inst);
    return addon_throw_errno(env, -rc, "uv_poll_init");
  }
  inst->poll.data = inst;
  napi_create_reference(env, argv[0], 1, &inst->callback);
  napi_create_string_utf8(env, "envd:inotify", NAPI_AUTO_LENGTH, &name);
  napi_async_init(env, NULL, name, &inst->async);
  uv_poll_start(&inst->poll, UV_READABLE, on_readable);
  napi_create_external(env, inst, on_finalize, NULL, &handle);
  return handle;
}

/* addWatch(handle, path, mask): wd */
static napi_value js_add_watch(napi_env env, napi_callback_info info) {
  size_t argc = 3, len = 0;
  napi_value argv[3], result;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 3) {
    napi_throw_type_error(env, NULL, "addWatch(handle, path, mask)");
    return NULL;
  }
  Instance *inst = get_instance(env, argv[0]);
  if (!inst) return NULL;
  if (napi_get_value_string_utf8(env, argv[1], NULL, 0, &len) != napi_ok) {
    napi_throw_type_error(env, NULL, "path must be a string");
    return NULL;
  }
  char *path = malloc(len + 1);
  if (!path) return addon_throw_errno(env, ENOMEM, "malloc");
  napi_get_value_string_utf8(env, argv[1], path, len + 1, &len);
  uint32_t mask = 0;
  napi_get_value_uint32(env, argv[2], &mask);
  int wd = inotify_add_watch(inst->fd, path, mask);
  int err = errno;
  free(path);
  if (wd < 0) return addon_throw_errno(env, err, "inotify_add_watch");
  napi_create_int32(env, wd, &result);
  return result;
}

/* rmWatch(handle, wd): 0 or the errno (EINVAL when the kernel already dropped the watch) */
static napi_value js_rm_watch(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2], result;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  Instance *inst = argc >= 2 ? get_instance(env, argv[0]) : NULL;
  if (!inst) return NULL;
  int32_t wd = -1;
  napi_get_value_int32(env, argv[1], &wd);
  int rc = inotify_rm_watch(inst->fd, wd) < 0 ? errno : 0;
  napi_create_int32(env, rc, &result);
  return result;
}

/* read(handle): Buffer of raw inotify_event records, or null when nothing is pending */
static napi_value js_read(napi_env env, napi_callback_info info) {
  size_t argc = 1, len = 0, cap = 0;
  napi_value argv[1], result;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  Instance *inst = argc >= 1 ? get_instance(env, argv[0]) : NULL;
  if (!inst) return NULL;
  char *buf = NULL;
  int err = 0;
  while (len < READ_LIMIT) {
    if (cap - len < READ_CHUNK) {
      char *grown = realloc(buf, cap + READ_CHUNK);
      if (!grown) {
        err = ENOMEM;
        break;
      }
      buf = grown;
      cap += READ_CHUNK;
    }
    ssize_t n = read(inst->fd, buf + len, cap - len);
    if (n > 0) {
      len += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    err = n == 0 ? EIO : errno;
    break;
  }
  if (err && len == 0) {
    free(buf);
    return addon_throw_errno(env, err, "read");
  }
  if (len == 0) {
    free(buf);
    napi_get_null(env, &result);
    return result;
  }
  napi_status st = napi_create_buffer_copy(env, len, buf, NULL, &result);
  free(buf);
  if (st != napi_ok) return addon_throw_errno(env, ENOMEM, "napi_create_buffer_copy");
  return result;
}

/* close(handle): stops polling and closes the fd (idempotent) */
static napi_value js_close(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  void *data = NULL;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || napi_get_value_external(env, argv[0], &data) != napi_ok || !data) {
    napi_throw_type_error(env, NULL, "expected an inotify handle");
    return NULL;
  }
  Instance *inst = (Instance *)data;
  if (!inst->closed) {
    inst->closed = 1;
    uv_poll_stop(&inst->poll);
    napi_delete_reference(env, inst->callback);
    napi_async_destroy(env, inst->async);
    uv_close((uv_handle_t *)&inst->poll, on_handle_closed);
  }
  return NULL;
}

static void set_u32(napi_env env, napi_value obj, const char *name, uint32_t v) {
  napi_value value;
  napi_create_uint32(env, v, &value);
  napi_set_named_property(env, obj, name, value);
}

/* Registers open, addWatch, rmWatch, read, close and the IN_* constants on the addon's exports. */
void register_inotify(napi_env env, napi_value exports) {
  napi_value c;
  addon_set_fn(env, exports, "open", js_open);
  addon_set_fn(env, exports, "addWatch", js_add_watch);
  addon_set_fn(env, exports, "rmWatch", js_rm_watch);
  addon_set_fn(env, exports, "read", js_read);
  addon_set_fn(env, exports, "close", js_close);
  napi_create_object(env, &c);
  set_u32(env, c, "IN_ACCESS", IN_ACCESS);
  set_u32(env, c, "IN_MODIFY", IN_MODIFY);
  set_u32(env, c, "IN_ATTRIB", IN_ATTRIB);
  set_u32(env, c, "IN_CLOSE_WRITE", IN_CLOSE_WRITE);
  set_u32(env, c, "IN_MOVED_FROM", IN_MOVED_FROM);
  set_u32(env, c, "IN_MOVED_TO", IN_MOVED_TO);
  set_u32(env, c, "IN_CREATE", IN_CREATE);
  set_u32(env, c, "IN_DELETE", IN_DELETE);
  set_u32(env, c, "IN_DELETE_SELF", IN_DELETE_SELF);
  set_u32(env, c, "IN_MOVE_SELF", IN_MOVE_SELF);
  set_u32(env, c, "IN_UNMOUNT", IN_UNMOUNT);
  set_u32(env, c, "IN_Q_OVERFLOW", IN_Q_OVERFLOW);
  set_u32(env, c, "IN_IGNORED", IN_IGNORED);
  set_u32(env, c, "IN_ONLYDIR", IN_ONLYDIR);
  set_u32(env, c, "IN_DONT_FOLLOW", IN_DONT_FOLLOW);
  set_u32(env, c, "IN_EXCL_UNLINK", IN_EXCL_UNLINK);
  set_u32(env, c, "IN_ISDIR", IN_ISDIR);
  napi_set_named_property(env, exports, "constants", c);
}
