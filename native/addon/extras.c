/*
 * The addon's helpers for envd's platform, besides inotify, spawn and the filesystem calls:
 * giving the C heap's free pages back (trimMalloc), pipes with a raised capacity for children's
 * output (pipe), and base64 straight between buffers (base64Encode, base64Decode).
 */
#define _GNU_SOURCE
#include <node_api.h>
#include "addon.h"
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/*
 * trimMalloc(): glibc keeps memory freed by the C heap (stream chunks, zlib state) mapped until
 * malloc_trim() hands the free pages back; envd calls it once a burst of work has gone quiet
 * (src/envd/platform/memory.ts). Returns whether memory was released; false where the C library has no malloc_trim.
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
 * pipe(capacity): a close-on-exec pipe for a child's output, its capacity
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
  if (pipe2(fds, O_CLOEXEC) != 0) return addon_throw_errno(env, errno, "pipe2");
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
 * base64Encode(src, dst, offset): writes the padded base64 of src into dst
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

/* Registers trimMalloc, pipe, base64Encode and base64Decode on the addon's exports. */
void register_extras(napi_env env, napi_value exports) {
  addon_set_fn(env, exports, "trimMalloc", js_trim_malloc);
  addon_set_fn(env, exports, "pipe", js_pipe);
  addon_set_fn(env, exports, "base64Encode", js_base64_encode);
  addon_set_fn(env, exports, "base64Decode", js_base64_decode);
}
