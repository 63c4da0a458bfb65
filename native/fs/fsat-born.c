/*
 * mkdirat(2) whose new directory is born the request user's. The calling thread takes the user's
 * fsuid and fsgid for the one call, which also drops its filesystem capabilities
 * (CAP_DAC_OVERRIDE and the rest), and raises those capabilities again: root decides where the
 * entry may be made, the kernel gives it the user as owner. Nothing is chowned afterwards, so
 * there is no moment between mkdir and chown in which a user swapping the new entry for another
 * directory or a link could have envd chown that instead.
 *
 * fsuid, fsgid and capabilities are per thread; the raw system calls change this libuv pool
 * thread only (glibc's set*id wrappers would change every thread of the daemon), and the thread
 * is back to its own before the call returns.
 */
#define _GNU_SOURCE
#include "fsat.h"
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct {
  struct __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3];
  uid_t fsuid;
  gid_t fsgid;
} Saved;

/* setfsuid/setfsgid report no error: an invalid id (-1) changes nothing and returns the current one. */
static uid_t fsuid_now(void) { return (uid_t)syscall(SYS_setfsuid, (uid_t)-1); }
static gid_t fsgid_now(void) { return (gid_t)syscall(SYS_setfsgid, (gid_t)-1); }

static int set_caps(const Saved *s) {
  struct __user_cap_header_struct head = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  return (int)syscall(SYS_capset, &head, s->caps);
}

/* Back to the thread's own ids and capabilities. A thread that cannot get back must not take other work. */
static void restore(const Saved *s) {
  syscall(SYS_setfsuid, s->fsuid);
  if (fsuid_now() != s->fsuid) abort();
  syscall(SYS_setfsgid, s->fsgid);
  if (fsgid_now() != s->fsgid) abort();
  if (set_caps(s) != 0) abort();
}

int fsat_mkdir_as(int dir, const char *name, mode_t mode, const FsatUser *user) {
  Saved s;
  s.fsuid = fsuid_now();
  s.fsgid = fsgid_now();
  if (user->uid == s.fsuid && user->gid == s.fsgid) return mkdirat(dir, name, mode);
  struct __user_cap_header_struct head = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  if (syscall(SYS_capget, &head, s.caps) != 0) return -1;
  syscall(SYS_setfsgid, (gid_t)user->gid);
  syscall(SYS_setfsuid, (uid_t)user->uid);
  int switched = fsgid_now() == user->gid && fsuid_now() == user->uid && set_caps(&s) == 0;
  if (!switched) {
    /* A daemon without CAP_SETUID/CAP_SETGID (not root) cannot give anything away: the directory
       is its own, as the reference's chown would have failed and been ignored. */
    restore(&s);
    return mkdirat(dir, name, mode);
  }
  int rc = mkdirat(dir, name, mode), err = errno;
  restore(&s);
  errno = err;
  return rc;
}
