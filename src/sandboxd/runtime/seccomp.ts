/**
 * A seccomp profile in the spirit of Docker's default: everything is allowed except the calls
 * that reach kernel surfaces a sandbox has no business with (namespaces, mounts, keyrings, BPF,
 * perf, modules, kexec, swap, clock, raw handles). Docker's own profile is an allow list that is
 * tied to its capability logic; a deny list keeps envd, sudo, python and curl working unchanged.
 * The capability set already refuses most of these; the profile is the second wall.
 */

const EPERM = 1;
const ENOSYS = 38;
const CLONE_NEWUSER = 0x10000000;

/** Calls refused with EPERM. */
const DENIED = [
  // namespaces: no nested user namespace (the kernel lets an unprivileged process make one)
  "unshare", "setns",
  // mounts (the new mount API too) and root changes
  "mount", "umount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
  "mount_setattr",
  // kernel keyrings, BPF, perf, userfaultfd, io_uring (a large, often exploited surface)
  "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
  "io_uring_setup", "io_uring_enter", "io_uring_register",
  // kernel log, modules, kexec, reboot, swap, accounting, quotas
  "syslog", "init_module", "finit_module", "delete_module", "create_module", "kexec_load", "kexec_file_load",
  "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "nfsservctl",
  // clocks, raw I/O ports, file handles (the classic open_by_handle_at escape), obsolete calls
  "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime",
  "iopl", "ioperm", "open_by_handle_at", "name_to_handle_at", "lookup_dcookie",
  "uselib", "ustat", "sysfs", "_sysctl", "vm86", "vm86old", "get_kernel_syms", "query_module",
  "fanotify_init", "vhangup",
];

/** The OCI `linux.seccomp` object for runc's config.json. */
export function seccompProfile(): object {
  return {
    defaultAction: "SCMP_ACT_ALLOW",
    // the host's own architecture and its compat ones, as Docker lists them
    architectures: process.arch === "arm64" ? ["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"] : ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
    syscalls: [
      { names: DENIED, action: "SCMP_ACT_ERRNO", errnoRet: EPERM },
      // clone3 passes its flags in memory seccomp cannot read: ENOSYS makes libc fall back to clone
      { names: ["clone3"], action: "SCMP_ACT_ERRNO", errnoRet: ENOSYS },
      {
        names: ["clone"],
        action: "SCMP_ACT_ERRNO",
        errnoRet: EPERM,
        args: [{ index: 0, value: CLONE_NEWUSER, valueTwo: CLONE_NEWUSER, op: "SCMP_CMP_MASKED_EQ" }],
      },
    ],
  };
}
