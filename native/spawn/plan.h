/* What a spawn is asked to do (plan.c reads it from the JS options; spawn.c carries it out). */
#ifndef ENVD_SPAWN_PLAN_H
#define ENVD_SPAWN_PLAN_H
#include <node_api.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define MAX_GROUPS 256

typedef struct {
  char **paths; /* exec candidates, in PATH order */
  int npaths;
  char **argv;
  char **envp;
  char *cwd;    /* NULL: keep */
  uid_t uid;
  gid_t gid;
  int set_uid;  /* 0: keep ours (uid is then unused) */
  int set_gid;
  int fds[3];   /* the child's stdin, stdout, stderr (all > 2) */
  int setsid;
  int ngroups;  /* -1: none given (no supplementary groups when uid/gid change) */
  gid_t groups[MAX_GROUPS];
  int set_nice; /* what the exec wrapper's `nice`, `ionice` and oom_score_adj write did */
  int nice;
  int ioprio;   /* -1: keep */
  char oom[16]; /* "": keep */
  volatile int err; /* set by the child when it could not exec */
} Plan;

/* A JS string as a malloc'd C string (NULL when it is not one). */
char *dup_string(napi_env env, napi_value v);
/* Frees a NULL-terminated list from dup_list or exec_candidates. */
void free_list(char **list);
/* A JS array of strings as a NULL-terminated list (NULL when it is not one). */
char **dup_list(napi_env env, napi_value arr);
/* The paths to try exec'ing `file` at, in PATH order (as execvp searches). */
char **exec_candidates(const char *file, char **envp, int *count);
/* options.name as an int32 into *out; false when absent or not a number. */
bool int_option(napi_env env, napi_value options, const char *name, int32_t *out);
/* A uid or gid argument: null or undefined keep ours (*set = 0), an id sets *id; false for anything else. */
bool id_arg(napi_env env, napi_value v, uint32_t *id, int *set);
/* The spawn options object into `p`; false (with a JS exception pending) when one is bad. */
bool read_options(napi_env env, napi_value options, Plan *p);

#endif
