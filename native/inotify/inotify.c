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
#include "spawn.h"
#include "asuser.h"
#include "fsat.h"
#include <sys/inotify.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

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

static napi_value throw_errno(napi_env env, int err, const char *syscall) {
  char msg[256];
  napi_value code, message, error, num;
  snprintf(msg, sizeof msg, "%s: %s (%s)", syscall, strerror(err), uv_err_name(-err));
  napi_create_string_utf8(env, uv_err_name(-err), NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &message);
  napi_create_error(env, code, message, &error);
  napi_create_int32(env, -err, &num);
  napi_set_named_property(env, error, "errno", num);
  napi_throw(env, error);
  return NULL;
}

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
  if (fd < 0) return throw_errno(env, errno, "inotify_init1");
  Instance *inst = calloc(1, sizeof *inst);
  if (!inst) {
    close(fd);
    return throw_errno(env, ENOMEM, "calloc");
  }
  inst->fd = fd;
  inst->env = env;
  int rc = uv_poll_init(loop, &inst->poll, fd);
  if (rc < 0) {
    close(fd);
    free(inst);
    return throw_errno(env, -rc, "uv_poll_init");
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
  if (!path) return throw_errno(env, ENOMEM, "malloc");
  napi_get_value_string_utf8(env, argv[1], path, len + 1, &len);
  uint32_t mask = 0;
  napi_get_value_uint32(env, argv[2], &mask);
  int wd = inotify_add_watch(inst->fd, path, mask);
  int err = errno;
  free(path);
  if (wd < 0) return throw_errno(env, err, "inotify_add_watch");
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
    return throw_errno(env, err, "read");
  }
  if (len == 0) {
    free(buf);
    napi_get_null(env, &result);
    return result;
  }
  napi_status st = napi_create_buffer_copy(env, len, buf, NULL, &result);
  free(buf);
  if (st != napi_ok) return throw_errno(env, ENOMEM, "napi_create_buffer_copy");
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

static void set_fn(napi_env env, napi_value exports, const char *name, napi_callback fn) {
  napi_value value;
  napi_create_function(env, name, NAPI_AUTO_LENGTH, fn, NULL, &value);
  napi_set_named_property(env, exports, name, value);
}

static void set_u32(napi_env env, napi_value obj, const char *name, uint32_t v) {
  napi_value value;
  napi_create_uint32(env, v, &value);
  napi_set_named_property(env, obj, name, value);
}

/*
 * trimMalloc(): not inotify, but this is envd's one always-shipped addon. glibc keeps memory
 * freed by the C heap (stream chunks, zlib state) mapped until malloc_trim() hands the free
 * pages back; envd calls it once a burst of work has gone quiet (src/system/memory.ts).
 * Returns whether memory was released; false where the C library has no malloc_trim.
 */
static napi_value js_trim_malloc(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result;
#ifdef __GLIBC__
  napi_get_boolean(env, malloc_trim(0) != 0, &result);
#else
  napi_get_boolean(env, false, &result);
#endif
  return result;
}

/*
 * pipe(capacity): not inotify either. A close-on-exec pipe for a child's output, its capacity
 * raised (F_SETPIPE_SZ, best effort) so a busy daemon finds big reads waiting, not 64 KiB ones.
 * Returns [readFd, writeFd, capacity].
 */
static napi_value js_pipe(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], result, v;
  int32_t want = 0;
  int fds[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc > 0) napi_get_value_int32(env, argv[0], &want);
  if (pipe2(fds, O_CLOEXEC) != 0) return throw_errno(env, errno, "pipe2");
  int capacity = want > 0 ? fcntl(fds[0], F_SETPIPE_SZ, want) : -1;
  if (capacity < 0) capacity = fcntl(fds[0], F_GETPIPE_SZ);
  napi_create_array_with_length(env, 3, &result);
  napi_create_int32(env, fds[0], &v);
  napi_set_element(env, result, 0, v);
  napi_create_int32(env, fds[1], &v);
  napi_set_element(env, result, 1, v);
  napi_create_int32(env, capacity, &v);
  napi_set_element(env, result, 2, v);
  return result;
}

/*
 * base64Encode(src, dst, offset): not inotify either. Writes the padded base64 of src into dst
 * at offset and returns the bytes written, without the JS string that Buffer#toString would
 * build (and copy again) in V8's heap: JSON output frames carry all process output this way.
 */
static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static napi_value js_base64_encode(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3], result;
  void *src_data, *dst_data;
  size_t src_len, dst_len;
  uint32_t offset = 0;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 3 || napi_get_typedarray_info(env, argv[0], NULL, &src_len, &src_data, NULL, NULL) != napi_ok ||
      napi_get_typedarray_info(env, argv[1], NULL, &dst_len, &dst_data, NULL, NULL) != napi_ok ||
      napi_get_value_uint32(env, argv[2], &offset) != napi_ok) {
    napi_throw_type_error(env, NULL, "base64Encode(src: Uint8Array, dst: Uint8Array, offset: number)");
    return NULL;
  }
  size_t need = (src_len + 2) / 3 * 4;
  if (offset > dst_len || dst_len - offset < need) {
    napi_throw_range_error(env, NULL, "base64Encode: destination too small");
    return NULL;
  }
  static uint16_t pairs[4096]; /* 12 input bits -> two output characters */
  static int pairs_ready = 0;
  if (!pairs_ready) {
    for (int k = 0; k < 4096; k++) {
      unsigned char two[2] = {(unsigned char)B64[k >> 6], (unsigned char)B64[k & 63]};
      memcpy(&pairs[k], two, 2);
    }
    pairs_ready = 1;
  }
  const unsigned char *restrict in = src_data;
  unsigned char *restrict out = (unsigned char *)dst_data + offset;
  size_t i = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  /* Six bytes at a time: one 64-bit load (8 bytes must be readable), four lookups, one store. */
  for (; i + 8 <= src_len; i += 6) {
    uint64_t w;
    memcpy(&w, in + i, 8);
    w = __builtin_bswap64(w) >> 16; /* the six bytes, big-endian, in the low 48 bits */
    uint16_t o[4] = {pairs[(w >> 36) & 4095], pairs[(w >> 24) & 4095], pairs[(w >> 12) & 4095], pairs[w & 4095]};
    memcpy(out, o, 8);
    out += 8;
  }
#endif
  for (; i + 3 <= src_len; i += 3) {
    uint32_t v = ((uint32_t)in[i] << 16) | ((uint32_t)in[i + 1] << 8) | in[i + 2];
    memcpy(out, &pairs[v >> 12], 2);
    memcpy(out + 2, &pairs[v & 4095], 2);
    out += 4;
  }
  if (i < src_len) {
    uint32_t v = (uint32_t)in[i] << 16;
    if (i + 1 < src_len) v |= (uint32_t)in[i + 1] << 8;
    out[0] = B64[v >> 18];
    out[1] = B64[(v >> 12) & 63];
    out[2] = i + 1 < src_len ? B64[(v >> 6) & 63] : '=';
    out[3] = '=';
  }
  napi_create_uint32(env, (uint32_t)need, &result);
  return result;
}

/*
 * base64Decode(src, dst): strict padded base64 (no whitespace) from src into dst; returns the
 * bytes written, or -1 when src is not valid base64 or dst is too small. Only the benchmark's
 * lean JSON client uses it (bench/lib/connect-reader.ts), so that decoding in the client does not
 * cap what the daemon is measured at; the daemon itself never decodes output.
 */
static napi_value js_base64_decode(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2], result;
  void *src_data, *dst_data;
  size_t src_len, dst_len;
  static int8_t rev[256];
  static int16_t rev2[65536]; /* two characters -> 12 bits, or -1 */
  static int rev_ready = 0;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 2 || napi_get_typedarray_info(env, argv[0], NULL, &src_len, &src_data, NULL, NULL) != napi_ok ||
      napi_get_typedarray_info(env, argv[1], NULL, &dst_len, &dst_data, NULL, NULL) != napi_ok) {
    napi_throw_type_error(env, NULL, "base64Decode(src: Uint8Array, dst: Uint8Array)");
    return NULL;
  }
  if (!rev_ready) {
    memset(rev, -1, sizeof rev);
    for (int k = 0; k < 64; k++) rev[(unsigned char)B64[k]] = (int8_t)k;
    for (int k = 0; k < 65536; k++) {
      int x = rev[k >> 8], y = rev[k & 255];
      rev2[k] = (int16_t)(x < 0 || y < 0 ? -1 : (x << 6) | y);
    }
    rev_ready = 1;
  }
  const unsigned char *restrict in = src_data;
  unsigned char *restrict out = dst_data;
  long written = -1;
  if (src_len % 4 == 0) {
    size_t pad = src_len == 0 ? 0 : (in[src_len - 1] == '=') + (in[src_len - 2] == '=');
    size_t n = src_len / 4 * 3 - pad;
    if (n <= dst_len) {
      size_t o = 0, i = 0;
      int bad = 0;
      /* Every group but the last has no padding and all three bytes fit: two lookups of
         two characters (12 bits) each. */
      for (; i + 4 < src_len; i += 4) {
        int hi = rev2[(in[i] << 8) | in[i + 1]], lo = rev2[(in[i + 2] << 8) | in[i + 3]];
        bad |= hi | lo;
        uint32_t v = ((uint32_t)hi << 12) | (uint32_t)lo;
        out[o] = (unsigned char)(v >> 16);
        out[o + 1] = (unsigned char)(v >> 8);
        out[o + 2] = (unsigned char)v;
        o += 3;
      }
      if (i < src_len) {
        int a = rev[in[i]], b = rev[in[i + 1]];
        int c = pad == 2 ? 0 : rev[in[i + 2]];
        int d = pad >= 1 ? 0 : rev[in[i + 3]];
        bad |= a | b | c | d;
        uint32_t v = ((uint32_t)a << 18) | ((uint32_t)b << 12) | ((uint32_t)c << 6) | (uint32_t)d;
        out[o] = (unsigned char)(v >> 16);
        if (o + 1 < n) out[o + 1] = (unsigned char)(v >> 8);
        if (o + 2 < n) out[o + 2] = (unsigned char)v;
      }
      bad = bad < 0;
      if (!bad) written = (long)n;
    }
  }
  napi_create_int64(env, written, &result);
  return result;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_value c;
  set_fn(env, exports, "open", js_open);
  set_fn(env, exports, "addWatch", js_add_watch);
  set_fn(env, exports, "rmWatch", js_rm_watch);
  set_fn(env, exports, "read", js_read);
  set_fn(env, exports, "close", js_close);
  set_fn(env, exports, "trimMalloc", js_trim_malloc);
  set_fn(env, exports, "pipe", js_pipe);
  set_fn(env, exports, "base64Encode", js_base64_encode);
  set_fn(env, exports, "base64Decode", js_base64_decode);
  register_spawn(env, exports);
  register_asuser(env, exports);
  register_fsat(env, exports);
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
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
