/*
 * Reading a spawn's plan from its JS arguments: strings and lists copied out of the JS heap, the
 * exec candidates along PATH, and the options object (ids, groups, cwd, fds, nice, ioprio, OOM).
 * Runs on the main thread before the child exists; spawn.c uses the result.
 */
#define _GNU_SOURCE
#include <node_api.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "plan.h"

/* ---- argument conversion ---- */

char *dup_string(napi_env env, napi_value v) {
  size_t len;
  if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok) return NULL;
  char *s = malloc(len + 1);
  if (s) napi_get_value_string_utf8(env, v, s, len + 1, &len);
  return s;
}

void free_list(char **list) {
  if (!list) return;
  for (char **p = list; *p; p++) free(*p);
  free(list);
}

/* A NULL-terminated copy of a JS string array; NULL on a type error or no memory. */
char **dup_list(napi_env env, napi_value arr) {
  uint32_t n;
  if (napi_get_array_length(env, arr, &n) != napi_ok) return NULL;
  char **list = calloc(n + 1, sizeof *list);
  if (!list) return NULL;
  for (uint32_t i = 0; i < n; i++) {
    napi_value v;
    napi_get_element(env, arr, i, &v);
    if (!(list[i] = dup_string(env, v))) {
      free_list(list);
      return NULL;
    }
  }
  return list;
}

/* What execvp would try: the file itself when it has a slash, else each PATH entry + "/" + file. */
char **exec_candidates(const char *file, char **envp, int *count) {
  const char *path = NULL;
  for (char **e = envp; *e; e++) {
    if (strncmp(*e, "PATH=", 5) == 0) path = *e + 5;
  }
  if (!path) path = "/usr/bin:/bin";
  if (strchr(file, '/') || *file == '\0') {
    char **one = calloc(2, sizeof *one);
    if (one && !(one[0] = strdup(file))) {
      free(one);
      return NULL;
    }
    *count = 1;
    return one;
  }
  int dirs = 1;
  for (const char *c = path; *c; c++) dirs += *c == ':';
  char **out = calloc(dirs + 1, sizeof *out);
  if (!out) return NULL;
  int n = 0;
  for (const char *start = path;; ) {
    const char *end = strchr(start, ':');
    size_t dlen = end ? (size_t)(end - start) : strlen(start);
    const char *dir = dlen ? start : ".";
    if (!dlen) dlen = 1;
    char *cand = malloc(dlen + 1 + strlen(file) + 1);
    if (!cand) {
      free_list(out);
      return NULL;
    }
    memcpy(cand, dir, dlen);
    cand[dlen] = '/';
    strcpy(cand + dlen + 1, file);
    out[n++] = cand;
    if (!end) break;
    start = end + 1;
  }
  *count = n;
  return out;
}


/* Reads options.name as an int32 into *out; false when absent or not a number. */
bool int_option(napi_env env, napi_value options, const char *name, int32_t *out) {
  napi_value v;
  napi_valuetype t;
  if (napi_get_named_property(env, options, name, &v) != napi_ok) return false;
  if (napi_typeof(env, v, &t) != napi_ok || t != napi_number) return false;
  return napi_get_value_int32(env, v, out) == napi_ok;
}

/*
 * Reads a uid or gid argument: null or undefined keep ours (*set = 0); otherwise an integer from
 * 0 to 2^32 - 2 (ids are unsigned 32-bit, and (uid_t)-1 means "unchanged" to the kernel). False
 * for anything else, which the caller refuses: a bad id must never leave the child as root.
 */
bool id_arg(napi_env env, napi_value v, uint32_t *id, int *set) {
  napi_valuetype t;
  *set = 0;
  if (napi_typeof(env, v, &t) != napi_ok) return false;
  if (t == napi_null || t == napi_undefined) return true;
  double d;
  if (t != napi_number || napi_get_value_double(env, v, &d) != napi_ok) return false;
  if (!(d >= 0 && d <= 4294967294.0) || d != (double)(uint32_t)d) return false;
  *id = (uint32_t)d;
  *set = 1;
  return true;
}

/* The optional last argument: { groups?: number[], nice?: number, ioprio?: number, oomScoreAdj?: number }. */
bool read_options(napi_env env, napi_value options, Plan *p) {
  p->ngroups = -1;
  p->ioprio = -1;
  napi_valuetype t;
  if (napi_typeof(env, options, &t) != napi_ok || t != napi_object) return true;
  napi_value groups;
  bool is_array = false;
  if (napi_get_named_property(env, options, "groups", &groups) == napi_ok && napi_is_array(env, groups, &is_array) == napi_ok && is_array) {
    uint32_t n = 0;
    napi_get_array_length(env, groups, &n);
    if (n > MAX_GROUPS) return false;
    for (uint32_t i = 0; i < n; i++) {
      napi_value v;
      uint32_t g = 0;
      int set = 0;
      napi_get_element(env, groups, i, &v);
      if (!id_arg(env, v, &g, &set) || !set) return false;
      p->groups[i] = (gid_t)g;
    }
    p->ngroups = (int)n;
  }
  int32_t v;
  if (int_option(env, options, "nice", &v)) {
    p->set_nice = 1;
    p->nice = v;
  }
  if (int_option(env, options, "ioprio", &v) && v >= 0) p->ioprio = v;
  if (int_option(env, options, "oomScoreAdj", &v)) snprintf(p->oom, sizeof p->oom, "%d", v);
  return true;
}
