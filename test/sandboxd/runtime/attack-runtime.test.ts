// Attacks on the runtime from inside a sandbox and from a hostile template, through the published
// SDK against the real sandboxd and runc: host files a template's links point at, raw frames,
// the OOM score, namespaces, mounts, keyrings, BPF, syscalls off the allow list, what the host
// sees of a sandbox (mounts, uids). Each probe runs as sandbox root (sudo inside).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { idRangeConflicts, MAPPED_RANGE, MAPPED_ROOT } from "../../../src/sandboxd/host/idmap.js";
import { SANDBOX_OOM_SCORE_ADJ, SANDBOXD_OOM_SCORE_ADJ } from "../../../src/sandboxd/host/oom.js";
import { sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";
import { runSdk } from "../helpers/templates.js";

/** What sandbox root runs to try each way out; prints one JSON object of outcomes (errno names). */
const PROBE = String.raw`
import ctypes, errno, json, os, socket, struct, subprocess
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def name(e): return errno.errorcode.get(e, str(e))
def sc(nr, *a):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) for x in a])
    return "ok" if r >= 0 else name(ctypes.get_errno())
def sock(*a):
    try:
        socket.socket(*a).close()
        return "ok"
    except OSError as e:
        return name(e.errno)
out = {}
st = open("/proc/self/status").read()
out["cap_net_raw"] = bool((int(st.split("CapEff:")[1].split()[0], 16) >> 13) & 1)
out["af_packet_raw"] = sock(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
out["af_packet_dgram"] = sock(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(3))
out["inet_raw"] = sock(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
out["inet6_raw"] = sock(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_UDP)
out["inet_sock_packet"] = sock(socket.AF_INET, 10, 0)
out["vsock"] = sock(40, socket.SOCK_STREAM, 0)
out["tcp"] = sock(socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC, 0)
out["udp6"] = sock(socket.AF_INET6, socket.SOCK_DGRAM, 0)
out["unix"] = sock(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0)
out["netlink"] = sock(socket.AF_NETLINK, socket.SOCK_RAW, 0)
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
    s.settimeout(10)
    s.sendto(struct.pack("!BBHHH", 8, 0, 0, 0, 1) + b"sandbox", ("127.0.0.1", 0))
    data, _ = s.recvfrom(1024)
    out["icmp_echo"] = "reply" if data[0] == 0 else "type %d" % data[0]
except OSError as e:
    out["icmp_echo"] = name(e.errno) if e.errno else str(e)
def oom(v):
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(v))
        return "ok"
    except OSError as e:
        return name(e.errno)
out["oom_start"] = int(open("/proc/self/oom_score_adj").read())
out["oom_set_-1000"] = oom(-1000)
out["oom_set_0"] = oom(0)
out["oom_set_below"] = oom(out["oom_start"] - 1)
out["oom_end"] = int(open("/proc/self/oom_score_adj").read())
scores = []
for p in os.listdir("/proc"):
    if p.isdigit():
        try: scores.append(int(open("/proc/%s/oom_score_adj" % p).read()))
        except OSError: pass
out["oom_lowest_in_sandbox"] = min(scores)
out["keyctl"] = sc(250, 0, -3, 0)
out["add_key"] = sc(248, 0, 0, 0, 0, -3)
out["bpf"] = sc(321, 0, 0, 0)
out["perf_event_open"] = sc(298, 0, 0, -1, -1, 0)
out["io_uring_setup"] = sc(425, 1, 0)
out["kcmp"] = sc(312, os.getpid(), os.getpid(), 0, 0, 0)
pidfd = libc.syscall(ctypes.c_long(434), ctypes.c_long(os.getpid()), ctypes.c_long(0))
out["pidfd_open"] = "ok" if pidfd >= 0 else name(ctypes.get_errno())
out["pidfd_getfd"] = sc(438, pidfd, 0, 0)
out["personality_no_aslr"] = sc(135, 0x0040000)
out["personality_query"] = sc(135, 0xffffffff)
out["unshare_user"] = sc(272, 0x10000000)
out["unshare_net"] = sc(272, 0x40000000)
out["setns"] = sc(308, 0, 0)
out["open_by_handle_at"] = sc(304, -100, 0, 0)
r = libc.syscall(ctypes.c_long(56), ctypes.c_long(0x20000 | 17), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0))
if r == 0:
    os._exit(0)
if r > 0:
    os.waitpid(r, 0)
out["clone_newns"] = "ok" if r >= 0 else name(ctypes.get_errno())
# calls the kernel has (6.8 and later) that no allow list names: refused before the kernel sees them
out["statmount"] = sc(457, 0, 0, 0, 0)
out["listmount"] = sc(458, 0, 0, 0, 0)
out["setxattrat"] = sc(463, -1, 0, 0, 0, 0, 0)
# ptrace of another user's process (the default user's)
ready_r, ready_w = os.pipe()
hold_r, hold_w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setgid(1000)
    os.setuid(1000)
    os.write(ready_w, b"x")
    os.read(hold_r, 1)
    os._exit(0)
os.read(ready_r, 1)
out["ptrace_other_user"] = sc(101, 16, pid, 0, 0)
os.kill(pid, 9)
os.waitpid(pid, 0)
print(json.dumps(out))
`;

/** The pids whose cgroup is the sandbox's (its processes as the host sees them). */
function sandboxPids(sandboxID: string): number[] {
  const out: number[] = [];
  for (const p of readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (readFileSync(`/proc/${p}/cgroup`, "utf8").includes(`/${sandboxID}\n`)) out.push(Number(p));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** The pid of the sandboxd serving `dataDir`. */
function sandboxdPid(dataDir: string): number | undefined {
  for (const p of readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const argv = readFileSync(`/proc/${p}/cmdline`, "utf8").split("\0");
      if (argv.includes("serve") && argv[argv.indexOf("--data-dir") + 1] === dataDir) return Number(p);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

describe("runtime under attack from a sandbox and a template", { skip: sandboxSkipReason() ?? false }, () => {
  let s: Sandboxd;
  let canary: string;
  let got: any;

  before(async () => {
    s = await startSandboxd();
    canary = mkdtempSync(join(tmpdir(), "attack-etc-"));
    for (const f of ["hosts", "hostname", "resolv.conf"]) writeFileSync(join(canary, f), `canary ${f}\n`);
    got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const sbx = await Sandbox.create({ timeoutMs: 600_000 });
      const run = async (cmd, opts = {}) => {
        try {
          const r = await sbx.commands.run(cmd, opts);
          return { code: r.exitCode, out: r.stdout, err: r.stderr };
        } catch (e) {
          return { code: e.exitCode ?? -1, out: e.stdout ?? "", err: e.stderr ?? String(e) };
        }
      };
      await sbx.files.write("/tmp/probe.py", ${JSON.stringify(PROBE)});
      const probe = await run("sudo python3 /tmp/probe.py");
      const shell = {
        unshareUser: await run("unshare -U -r true"),
        unshareNetRoot: await run("sudo unshare -n true"),
        mount: await run("sudo mount -t tmpfs none /mnt"),
        setarch: await run("setarch -R true"),
      };
      // socket(AF_PACKET, SOCK_RAW) through the x32 ABI (syscall number | 0x40000000)
      const x32 = await run("sudo python3 -c 'import ctypes; print(ctypes.CDLL(None).syscall(0x40000000 | 41, 17, 3, 0))'; echo rc=$?");
      const view = await run('hostname; getent hosts "$(hostname)"; cat /etc/resolv.conf /.e2b; sudo -n true; echo "198.18.0.9 extra" | sudo tee -a /etc/hosts >/dev/null && grep -c extra /etc/hosts');
      const tools = await run("python3 -c 'print(6*7)' && curl -s -o /dev/null -w '%{http_code}\\\\n' http://127.0.0.1:49983/health && cd /tmp && git init -q r && cd r && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m x && git log --oneline | wc -l && sudo -n id -u");
      let ptyText = "";
      const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => (ptyText += new TextDecoder().decode(d)), timeoutMs: 30_000 });
      await sbx.pty.sendInput(h.pid, new TextEncoder().encode("echo pty-$((40+2)) $(sudo -n whoami); exit 0\\n"));
      const ptyExit = await h.wait();
      console.log(JSON.stringify({ id: sbx.sandboxId, probe, shell, x32, view, tools, pty: { text: ptyText, exit: ptyExit.exitCode } }));
    `);
    assert.equal(got.probe.code, 0, JSON.stringify(got.probe));
    got.p = JSON.parse(got.probe.out);
  });
  after(async () => {
    await s?.stop();
    if (canary) rmSync(canary, { recursive: true, force: true });
  });

  test("no raw frames: CAP_NET_RAW is gone and packet and raw IP sockets fail with EPERM for sandbox root; ICMP datagram sockets (ping) work", () => {
    const p = got.p;
    assert.equal(p.cap_net_raw, false);
    for (const k of ["af_packet_raw", "af_packet_dgram", "inet_raw", "inet6_raw", "inet_sock_packet", "vsock"]) assert.equal(p[k], "EPERM", `${k}: ${p[k]}`);
    for (const k of ["tcp", "udp6", "unix", "netlink"]) assert.equal(p[k], "ok", `${k}: ${p[k]}`);
    assert.equal(p.icmp_echo, "reply");
  });

  test("OOM: no sandbox process scores below zero or can make itself so; runc starts each at the configured value, which is also the floor where the host grants CAP_SYS_RESOURCE; sandboxd itself is near the floor", () => {
    const p = got.p;
    // without CAP_SYS_RESOURCE (some hosts withhold it even from root) no floor can be set: a
    // process may lower itself to what it inherited, sandboxd's own default (0)
    const capResource = ((BigInt("0x" + /^CapEff:\s+([0-9a-f]+)/m.exec(readFileSync("/proc/self/status", "utf8"))![1]) >> 24n) & 1n) === 1n;
    assert.equal(p["oom_set_-1000"], "EACCES");
    assert.ok(p.oom_lowest_in_sandbox >= 0, String(p.oom_lowest_in_sandbox));
    const pids = sandboxPids(got.id);
    assert.ok(pids.length >= 2, "the sandbox's processes are visible from the host");
    const scores = pids.map((pid) => Number(readFileSync(`/proc/${pid}/oom_score_adj`, "utf8")));
    for (const v of scores) assert.ok(v >= 0, `a sandbox process scores ${v}`);
    // PID 1 (tini) and the restart loop keep what runc gave them
    assert.equal(Math.max(...scores), SANDBOX_OOM_SCORE_ADJ);
    const d = sandboxdPid(s.dataDir);
    assert.ok(d, "sandboxd's process found");
    const own = Number(readFileSync(`/proc/${d}/oom_score_adj`, "utf8"));
    if (capResource) {
      assert.equal(p.oom_start, SANDBOX_OOM_SCORE_ADJ);
      for (const k of ["oom_set_0", "oom_set_below"]) assert.equal(p[k], "EACCES", `${k}: ${p[k]}`);
      assert.ok(p.oom_end >= SANDBOX_OOM_SCORE_ADJ && Math.min(...scores) >= SANDBOX_OOM_SCORE_ADJ);
      assert.equal(own, SANDBOXD_OOM_SCORE_ADJ);
    } else {
      assert.ok(p.oom_end >= 0);
      assert.match(s.logs(), /cannot lower sandboxd's own oom_score_adj/);
    }
  });

  test("seccomp is an allow list: namespaces, mounts, keyrings, BPF, perf, io_uring, kcmp, pidfd_getfd, personality variants and calls it does not name all fail", { skip: process.arch !== "x64" && "syscall numbers are x86-64's" }, () => {
    const p = got.p;
    for (const k of ["keyctl", "add_key", "bpf", "perf_event_open", "io_uring_setup", "kcmp", "pidfd_getfd", "personality_no_aslr", "unshare_user", "unshare_net", "setns", "open_by_handle_at", "clone_newns"]) {
      assert.equal(p[k], "EPERM", `${k}: ${p[k]}`);
    }
    for (const k of ["statmount", "listmount", "setxattrat"]) assert.ok(p[k] === "EPERM" || p[k] === "ENOSYS", `${k}: ${p[k]}`);
    assert.equal(p.pidfd_open, "ok");
    assert.equal(p.personality_query, "ok");
    assert.equal(p.ptrace_other_user, "EPERM");
    // x32 is not among the filter's architectures: the call kills its caller (SIGSYS, 128 + 31),
    // or fails where the filter would have let it reach a kernel without the x32 ABI
    const x32 = got.x32.out as string;
    assert.ok(/rc=159/.test(x32) || /^-\d+$/m.test(x32), `x32 socket: ${x32}`);
    assert.doesNotMatch(x32, /^\d+$/m, "an x32 call got a socket");
    for (const [k, r] of Object.entries(got.shell) as [string, { code: number; err: string }][]) {
      assert.notEqual(r.code, 0, `${k} succeeded`);
      assert.match(r.err, /Operation not permitted|permission denied/i, `${k}: ${r.err}`);
    }
  });

  test("the sandbox's own view is E2B's, and the tools, sudo and a PTY work under the profile", () => {
    assert.equal(got.view.code, 0, JSON.stringify(got.view));
    const lines = got.view.out.trim().split("\n");
    assert.equal(lines[0], got.id);
    assert.match(lines[1], new RegExp(`^\\d+\\.\\d+\\.\\d+\\.\\d+\\s+${got.id}$`));
    assert.match(lines[2], /^nameserver \d+\.\d+\.\d+\.\d+$/);
    assert.deepEqual(lines.slice(3, 6).map((l: string) => l.split("=")[0]), ["ENV_ID", "TEMPLATE_ID", "BUILD_ID"]);
    assert.equal(lines[6], "1", "sandbox root edits /etc/hosts in place");
    assert.doesNotMatch(got.view.err, /unable to resolve host/);
    assert.equal(got.tools.code, 0, JSON.stringify(got.tools));
    assert.deepEqual(got.tools.out.trim().split("\n"), ["42", "204", "1", "0"]);
    assert.equal(got.pty.exit, 0);
    assert.match(got.pty.text, /pty-42 root/);
  });

  test("the host sees the sandbox's mounts nosuid,nodev and its root as a uid no host user or subordinate range owns", () => {
    const mine = readFileSync("/proc/self/mounts", "utf8").split("\n").map((l) => l.split(" ")).filter((f) => f[1]?.startsWith(s.dataDir + "/"));
    assert.ok(mine.length >= 1, "the sandbox's disk is mounted on the host");
    for (const f of mine) {
      const opts = f[3].split(",");
      assert.ok(opts.includes("nosuid") && opts.includes("nodev"), `${f[1]} (${f[2]}) is mounted ${f[3]}`);
    }
    const uids = sandboxPids(got.id).map((pid) => Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]));
    assert.ok(uids.length > 0);
    const subuid = readFileSync("/etc/subuid", "utf8").split("\n").filter(Boolean).map((l) => l.split(":").map(Number));
    for (const uid of uids) {
      assert.ok(uid >= MAPPED_ROOT && uid < MAPPED_ROOT + MAPPED_RANGE, `host uid ${uid} outside the sandboxes' range`);
      for (const [, start, count] of subuid) assert.ok(uid < start || uid >= start + count, `host uid ${uid} is in /etc/subuid's ${start}:${count}`);
    }
    assert.deepEqual(idRangeConflicts(), []);
    const fake: Record<string, string> = { "/etc/subuid": `user:100000:65536\nbig:${MAPPED_ROOT - 10}:20\n`, "/etc/passwd": `root:x:0:0::/root:/bin/sh\nodd:x:${MAPPED_ROOT + 5}:0::/:/bin/sh\n` };
    assert.deepEqual(idRangeConflicts(MAPPED_ROOT, MAPPED_RANGE, (f) => fake[f]), [`/etc/subuid: big:${MAPPED_ROOT - 10}:20`, `/etc/passwd: odd:x:${MAPPED_ROOT + 5}:0::/:/bin/sh`]);
  });

  test("a template whose /etc links to a host directory: creating a sandbox of it leaves the host's files untouched, and the sandbox works", async () => {
    const r = await runSdk(s, `
      import { Template, Sandbox } from "e2b";
      const t = Template().fromBaseImage().setUser("0")
        .runCmd("mkdir -p ${canary} && cp -a /etc/. ${canary}/ && rm -rf /etc && ln -s ${canary} /etc");
      await Template.build(t, "attack-etc-link", { memoryMB: 256 });
      const sbx = await Sandbox.create("attack-etc-link");
      // the template's default user is "0", which envd does not take as a name: ask for one
      const r = await sbx.commands.run('readlink /etc; hostname; getent hosts "$(hostname)"; cat /etc/resolv.conf; sudo -n whoami', { user: "user" });
      await sbx.kill();
      console.log(JSON.stringify({ id: sbx.sandboxId, out: r.stdout.trim().split("\\n") }));
    `);
    for (const f of ["hosts", "hostname", "resolv.conf"]) assert.equal(readFileSync(join(canary, f), "utf8"), `canary ${f}\n`, `the host's ${f} was rewritten`);
    assert.equal(r.out[0], canary);
    assert.equal(r.out[1], r.id);
    assert.match(r.out[2], new RegExp(`\\s${r.id}$`));
    assert.match(r.out[3], /^nameserver /);
    assert.equal(r.out[4], "root");
  });
});
