/**
 * The sandboxes' seccomp profile, in the shape of Docker's default: every call not on the allow
 * list (seccomp-allow.ts) fails with EPERM, so a syscall the kernel adds later is refused until it
 * is reviewed. Calls whose danger is in an argument are allowed by argument, as Docker does:
 * clone without namespace flags, personality with the harmless values. socket is narrowed further
 * than Docker's: no packet sockets and no raw IP sockets (frames that would skip the sandbox's
 * firewall hooks), no vsock and no rarely used families; the capability set withholds
 * CAP_NET_RAW as the first wall.
 */
import { ALLOWED_PERSONALITIES, ALLOWED_SYSCALLS, ARCH_SYSCALLS } from "./seccomp-allow.js";

const EPERM = 1;
const ENOSYS = 38;
/** Every CLONE_NEW* flag clone() takes (namespaces, cgroup namespace included). */
const CLONE_NAMESPACE_FLAGS = 0x7e020000;

const AF_UNIX = 1;
const AF_INET = 2;
const AF_INET6 = 10;
const AF_NETLINK = 16;
/** The socket type without SOCK_NONBLOCK and SOCK_CLOEXEC. */
const SOCK_TYPE_MASK = 0xf;
const SOCK_STREAM = 1;
const SOCK_DGRAM = 2;
const SOCK_SEQPACKET = 5;

type Arg = { index: number; value: number; valueTwo?: number; op: "SCMP_CMP_EQ" | "SCMP_CMP_MASKED_EQ" | "SCMP_CMP_NE" };
type Rule = { names: string[]; action: "SCMP_ACT_ALLOW" | "SCMP_ACT_ERRNO"; errnoRet?: number; args?: Arg[] };

/**
 * socket() by family and type: unix sockets and netlink (getifaddrs, ip, sudo's audit) of any
 * type; IPv4 and IPv6 as stream, datagram (ICMP datagram sockets too: ping without privileges)
 * and SCTP-style seqpacket. Each rule is one (family, type) pair: runc ANDs the conditions of one
 * rule and ORs rules.
 */
function socketRules(): Rule[] {
  const rules: Rule[] = [AF_UNIX, AF_NETLINK].map((family) => ({ names: ["socket"], action: "SCMP_ACT_ALLOW", args: [{ index: 0, value: family, op: "SCMP_CMP_EQ" }] }));
  for (const family of [AF_INET, AF_INET6]) {
    for (const type of [SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET]) {
      rules.push({
        names: ["socket"],
        action: "SCMP_ACT_ALLOW",
        args: [
          { index: 0, value: family, op: "SCMP_CMP_EQ" },
          { index: 1, value: SOCK_TYPE_MASK, valueTwo: type, op: "SCMP_CMP_MASKED_EQ" },
        ],
      });
    }
  }
  return rules;
}

/** The OCI `linux.seccomp` object for runc's config.json. */
export function seccompProfile(): object {
  const arch = process.arch === "arm64" ? "arm64" : "x64";
  return {
    defaultAction: "SCMP_ACT_ERRNO",
    defaultErrnoRet: EPERM,
    // The host's own architecture and its 32-bit compat one. Docker also lists x32; without it a
    // call through the x32 ABI hits libseccomp's bad-architecture action and kills its thread
    // (SIGSYS) instead of failing with EPERM. x32 binaries are all but extinct (Debian's kernel
    // turns the ABI off at boot), and its third copy of the filter cost runc about 15 ms of CPU
    // per start, every create and warm-pool refill.
    architectures: arch === "arm64" ? ["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"] : ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86"],
    syscalls: [
      { names: [...ALLOWED_SYSCALLS, ...ARCH_SYSCALLS[arch]], action: "SCMP_ACT_ALLOW" },
      ...ALLOWED_PERSONALITIES.map((value): Rule => ({ names: ["personality"], action: "SCMP_ACT_ALLOW", args: [{ index: 0, value, op: "SCMP_CMP_EQ" }] })),
      // clone without any CLONE_NEW* flag: no namespace (a nested user namespace above all)
      { names: ["clone"], action: "SCMP_ACT_ALLOW", args: [{ index: 0, value: CLONE_NAMESPACE_FLAGS, valueTwo: 0, op: "SCMP_CMP_MASKED_EQ" }] },
      // clone3 passes its flags in memory seccomp cannot read: ENOSYS makes libc fall back to clone
      { names: ["clone3"], action: "SCMP_ACT_ERRNO", errnoRet: ENOSYS },
      ...socketRules(),
    ] satisfies Rule[],
  };
}
