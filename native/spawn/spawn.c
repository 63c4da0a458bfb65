/*
 * spawn(): starts a process without fork()ing the daemon. libuv's uv_spawn forks, which copies
 * the page tables of the whole (tens of MiB) daemon and blocks the event loop until the child has
 * exec'd: 2-4 ms per Start on a busy 2-core sandbox. Here the child is a clone(CLONE_VM |
 * CLONE_VFORK) sharing our memory on a small stack of its own, as glibc's posix_spawn does: the
 * loop waits only for the child's few syscalls and exec. posix_spawn itself cannot change uid
 * and gid, hence this file.
 *
 * The child only makes raw system calls (setgroups/setgid/setuid through syscall(2), so glibc's
 * "set id in every thread" broadcast, meant for a process of our own, never runs), with every
 * signal blocked until just before exec and every handler reset to the default, as libuv does.
 * An exec failure is reported through memory shared with the parent, which is suspended until
 * the child has exec'd or exited.
 *
 * The exit is watched with a pidfd (Linux >= 5.3) polled on the main loop; libuv reaps only its
 * own children, so ours are reaped here, and the JS callback gets the exit code or signal.
 */
#define _GNU_SOURCE
#include <node_api.h>
#include <uv.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "spawn.h"
#include "plan.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* The 32-bit id calls where a platform has both (the plain ones take 16-bit ids there). */
#ifdef SYS_setuid32
#define SYS_SETUID SYS_setuid32
#define SYS_SETGID SYS_setgid32
#define SYS_SETGROUPS SYS_setgroups32
#else
#define SYS_SETUID SYS_setuid
#define SYS_SETGID SYS_setgid
#define SYS_SETGROUPS SYS_setgroups
#endif

#define CHILD_STACK_BYTES (64 * 1024)
#define IOPRIO_WHO_PROCESS 1

static int child_main(void *arg) {
  Plan *p = arg;
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int n = 1; n < 32; n++) {
    if (n != SIGKILL && n != SIGSTOP) sigaction(n, &dfl, NULL);
  }
  /* Priorities envd runs with are not passed on; like the wrapper's steps, failures are ignored. */
  if (p->oom[0]) {
    int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      if (write(fd, p->oom, strlen(p->oom)) < 0) {}
      close(fd);
    }
  }
  if (p->set_nice) syscall(SYS_setpriority, PRIO_PROCESS, 0, p->nice);
  if (p->ioprio >= 0) syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, p->ioprio);
  if (p->setsid && setsid() < 0) goto fail;
  if (p->ngroups >= 0) {
    if (syscall(SYS_SETGROUPS, p->ngroups, p->groups) != 0) goto fail;
  } else if ((p->set_uid || p->set_gid) && syscall(SYS_SETGROUPS, 0, NULL) != 0) goto fail;
  if (p->set_gid && syscall(SYS_SETGID, p->gid) != 0) goto fail;
  if (p->set_uid && syscall(SYS_SETUID, p->uid) != 0) goto fail;
  if (p->cwd && chdir(p->cwd) != 0) goto fail;
  for (int fd = 0; fd < 3; fd++) {
    if (dup2(p->fds[fd], fd) < 0) goto fail;
  }
  sigset_t none;
  sigemptyset(&none);
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, _NSIG / 8);
  {
    int err = ENOENT;
    for (int i = 0; i < p->npaths; i++) {
      execve(p->paths[i], p->argv, p->envp);
      if (errno == EACCES) err = EACCES;
      else if (errno != ENOENT && errno != ENOTDIR) {
        err = errno;
        break;
      }
    }
    p->err = err;
    syscall(SYS_exit, 127);
  }
fail:
  p->err = errno ? errno : EINVAL;
  syscall(SYS_exit, 127);
  return 0;
}

/* ---- exit watching ---- */

typedef struct {
  uv_poll_t poll;
  int pidfd;
  pid_t pid;
  napi_env env;
  napi_ref callback;
  napi_async_context async;
} Watch;

static void on_watch_closed(uv_handle_t *handle) {
  Watch *w = handle->data;
  close(w->pidfd);
  free(w);
}

static void on_exit_readable(uv_poll_t *handle, int status, int events) {
  (void)status;
  (void)events;
  Watch *w = handle->data;
  siginfo_t info;
  memset(&info, 0, sizeof info);
  int rc;
  do rc = waitid(P_PID, w->pid, &info, WEXITED | WNOHANG);
  while (rc < 0 && errno == EINTR);
  if (rc == 0 && info.si_pid == 0) return; /* not exited yet (spurious wakeup) */
  int code = -1, sig = 0;
  if (rc == 0 && info.si_code == CLD_EXITED) code = info.si_status;
  else if (rc == 0) sig = info.si_status; /* killed or dumped */
  uv_poll_stop(&w->poll);
  napi_env env = w->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) == napi_ok) {
    napi_value cb, recv, args[2], result;
    napi_get_reference_value(env, w->callback, &cb);
    napi_get_global(env, &recv);
    napi_create_int32(env, code, &args[0]);
    napi_create_int32(env, sig, &args[1]);
    if (napi_make_callback(env, w->async, recv, cb, 2, args, &result) == napi_pending_exception) {
      napi_value exc;
      napi_get_and_clear_last_exception(env, &exc);
      napi_fatal_exception(env, exc);
    }
    napi_close_handle_scope(env, scope);
  }
  napi_delete_reference(env, w->callback);
  napi_async_destroy(env, w->async);
  uv_close((uv_handle_t *)&w->poll, on_watch_closed);
}

static napi_value throw_spawn_error(napi_env env, int err) {
  napi_value code, message, error, num;
  napi_create_string_utf8(env, uv_err_name(-err), NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, strerror(err), NAPI_AUTO_LENGTH, &message);
  napi_create_error(env, code, message, &error);
  napi_create_int32(env, -err, &num);
  napi_set_named_property(env, error, "errno", num);
  napi_throw(env, error);
  return NULL;
}

/*
 * spawn(file, argv, envp, cwd, uid, gid, [stdin, stdout, stderr], setsid, onExit(code, signal)
 *       [, { groups, nice, ioprio, oomScoreAdj }]) → pid. uid/gid null keep ours; cwd "" keeps
 * ours; without `groups` a change of uid or gid drops every supplementary group. Throws an
 * Error whose code is the errno name (ENOENT, EACCES, ...) when the command cannot be executed.
 */
static napi_value js_spawn(napi_env env, napi_callback_info info) {
  size_t argc = 10;
  napi_value argv[10], result;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  napi_valuetype cbtype;
  if (argc < 9 || napi_typeof(env, argv[8], &cbtype) != napi_ok || cbtype != napi_function) {
    napi_throw_type_error(env, NULL, "spawn(file, argv, envp, cwd, uid, gid, fds, setsid, onExit)");
    return NULL;
  }
  Plan p;
  memset(&p, 0, sizeof p);
  if (!read_options(env, argc > 9 ? argv[9] : NULL, &p)) {
    napi_throw_range_error(env, NULL, "spawn: bad options (at most 256 groups, each an id from 0 to 4294967294)");
    return NULL;
  }
  uint32_t uid = 0, gid = 0;
  bool setsid_flag = false;
  if (!id_arg(env, argv[4], &uid, &p.set_uid) || !id_arg(env, argv[5], &gid, &p.set_gid)) {
    napi_throw_range_error(env, NULL, "spawn: uid and gid must be null (keep) or an id from 0 to 4294967294");
    return NULL;
  }
  napi_get_value_bool(env, argv[7], &setsid_flag);
  p.uid = (uid_t)uid;
  p.gid = (gid_t)gid;
  p.setsid = setsid_flag;
  for (uint32_t i = 0; i < 3; i++) {
    napi_value v;
    int32_t fd = -1;
    napi_get_element(env, argv[6], i, &v);
    napi_get_value_int32(env, v, &fd);
    if (fd <= 2) {
      napi_throw_range_error(env, NULL, "spawn: stdio descriptors must be above 2");
      return NULL;
    }
    p.fds[i] = fd;
  }
  char *file = dup_string(env, argv[0]);
  char *cwd = dup_string(env, argv[3]);
  p.argv = dup_list(env, argv[1]);
  p.envp = dup_list(env, argv[2]);
  p.paths = (file && p.envp) ? exec_candidates(file, p.envp, &p.npaths) : NULL;
  p.cwd = cwd && *cwd ? cwd : NULL;
  int err = 0;
  pid_t pid = -1;
  if (!file || !cwd || !p.argv || !p.envp || !p.paths) err = ENOMEM;
  /* One stack for every child of a thread, mapped once: a thread spawns one child at a time, and a
   * child leaves it (by exec or exit) before we resume. Unmapping a stack per spawn cost a TLB
   * shootdown across the daemon's threads, which in a VM is an IPI per vCPU. */
  static __thread void *stack = MAP_FAILED;
  if (!err && stack == MAP_FAILED) {
    stack = mmap(NULL, CHILD_STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) err = errno;
  }
  if (!err) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid = clone(child_main, (char *)stack + CHILD_STACK_BYTES, CLONE_VM | CLONE_VFORK | SIGCHLD, &p);
    if (pid < 0) err = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  if (!err && p.err) {
    err = p.err;
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  }
  int pidfd = -1;
  if (!err) {
    pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) err = errno; /* cannot happen where spawnSupported() said yes */
  }
  free(file);
  free(cwd);
  free_list(p.argv);
  free_list(p.envp);
  free_list(p.paths);
  if (err) {
    if (pid > 0 && pidfd < 0 && !p.err) {
      kill(pid, SIGKILL);
      while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
    }
    return throw_spawn_error(env, err);
  }
  uv_loop_t *loop;
  napi_get_uv_event_loop(env, &loop);
  Watch *w = calloc(1, sizeof *w);
  if (!w) return throw_spawn_error(env, ENOMEM); /* the child runs on, unwatched */
  w->pidfd = pidfd;
  w->pid = pid;
  w->env = env;
  uv_poll_init(loop, &w->poll, pidfd);
  w->poll.data = w;
  napi_value name;
  napi_create_reference(env, argv[8], 1, &w->callback);
  napi_create_string_utf8(env, "envd:spawn", NAPI_AUTO_LENGTH, &name);
  napi_async_init(env, NULL, name, &w->async);
  uv_poll_start(&w->poll, UV_READABLE, on_exit_readable);
  napi_create_int32(env, pid, &result);
  return result;
}

/* spawnSupported(): whether pidfd_open works here (the exit of a spawned child can be watched). */
static napi_value js_spawn_supported(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result;
  int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
  if (fd >= 0) close(fd);
  napi_get_boolean(env, fd >= 0, &result);
  return result;
}

/* ioprioGet(): envd's own IO priority as ioprio_get(2) gives it (class << 13 | data), or -errno. */
static napi_value js_ioprio_get(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result;
  long v = syscall(SYS_ioprio_get, 1 /* IOPRIO_WHO_PROCESS */, 0);
  napi_create_int32(env, v < 0 ? -errno : (int32_t)v, &result);
  return result;
}

void register_spawn(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "spawn", NAPI_AUTO_LENGTH, js_spawn, NULL, &fn);
  napi_set_named_property(env, exports, "spawn", fn);
  napi_create_function(env, "spawnSupported", NAPI_AUTO_LENGTH, js_spawn_supported, NULL, &fn);
  napi_set_named_property(env, exports, "spawnSupported", fn);
  napi_create_function(env, "ioprioGet", NAPI_AUTO_LENGTH, js_ioprio_get, NULL, &fn);
  napi_set_named_property(env, exports, "ioprioGet", fn);
}
