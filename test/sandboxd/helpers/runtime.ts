// Fixtures of the runtime tests: the real base rootfs (cached per machine), the real envd release
// artifact, a runc runtime on a scratch data dir, commands through envd, and leftover checks.
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { createHash, randomBytes } from "node:crypto";
import { createJsonLogger } from "../../../src/common/log.js";
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Process } from "../../../src/envd/gen/process/process_pb.js";
import { ensureBaseRootfs } from "../../../src/sandboxd/images/base.js";
import { takeLock } from "../../../src/sandboxd/images/lock.js";
import { cgroupMounts } from "../../../src/sandboxd/host/cgroups.js";
import { createSlotNetwork } from "../../../src/sandboxd/network/slot-network.js";
import { createRuncRuntime, type RuncOptions } from "../../../src/sandboxd/runtime/runc.js";
import { StoragePool } from "../../../src/sandboxd/storage/pool.js";
import type { Runtime, SandboxSpec } from "../../../src/sandboxd/runtime/runtime.js";
import { assertTestRange } from "./net-range.js";
import { ARTIFACT_NAME, which } from "../../envd/helpers/image-machine.js";
import { ROOT } from "../../envd/helpers/daemon.js";

/** Why the runtime tests cannot run here, or undefined when they can. */
export function skipReason(): string | undefined {
  if (!which("runc")) return "runc is not installed (apt-get install runc)";
  if (process.getuid?.() !== 0) return "the runc runtime needs root";
  return undefined;
}

/** A quiet logger for runtimes under test (errors still show). */
export const testLog = createJsonLogger({ level: process.env.SANDBOXD_TEST_LOG ?? "error", fd: 2, name: "test" });

/** The cached base rootfs (built by debootstrap the first time on this machine). */
export function baseRootfs(): Promise<string> {
  return ensureBaseRootfs({ cacheDir: process.env.SANDBOXD_CACHE_DIR ?? "/var/cache/sandboxd", log: testLog });
}

/**
 * The unpacked envd release artifact: dist/<artifact> when it is at least as new as the envd
 * bundle, else built now (once for all test files of a run, under a lock).
 */
export async function envdDir(): Promise<string> {
  const dir = join(ROOT, "dist", ARTIFACT_NAME);
  const fresh = () => existsSync(join(dir, "envd")) && statSync(join(dir, "envd")).mtimeMs >= statSync(join(ROOT, "dist", "envd")).mtimeMs;
  if (fresh()) return dir;
  const release = await takeLock(join(ROOT, "dist", ".artifact.lock"), { timeoutMs: 10 * 60_000 });
  try {
    if (!fresh()) execFileSync(process.execPath, [join(ROOT, "scripts", "package-sea.mjs")], { cwd: ROOT, stdio: "ignore" });
  } finally {
    release();
  }
  return dir;
}

/** A new sandbox ID in E2B's shape ("i" + 20 of [a-z0-9]). */
export function newSandboxID(): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  return "i" + [...randomBytes(20)].map((b) => alphabet[b % 36]).join("");
}

/** A runc runtime on a fresh data dir; `octet` picks the test file's own 198.19.<octet>.0/24. */
export interface TestRuntime {
  rt: Runtime;
  dataDir: string;
  /** The test file's own 198.19.<octet>.0/24. */
  networkCidr: string;
  opts: RuncOptions;
  /** The storage pool sandbox disks live in (a loop-backed XFS image under the data dir). */
  storage: StoragePool;
  rootfs: string;
  spec(extra?: Partial<SandboxSpec>): SandboxSpec;
  /** Removes every sandbox and the data dir, then asserts nothing is left on the host. */
  cleanup(): Promise<void>;
}

/** Makes a runtime for one test file. */
export async function testRuntime(octet: number, extra: Partial<RuncOptions> = {}): Promise<TestRuntime> {
  const networkCidr = `198.19.${octet}.0/24`;
  assertTestRange(networkCidr, "a test runtime");
  const dataDir = mkdtempSync("/tmp/sandboxd-rt-");
  chmodSync(dataDir, 0o711);
  const [rootfs, envd] = await Promise.all([baseRootfs(), envdDir()]);
  // spares as `serve --spare-slots` would have them, asked for by the environment as serve's flag is
  const network = createSlotNetwork({ dataDir, networkCidr, spares: Number(process.env.SANDBOXD_SPARE_SLOTS ?? 0), log: testLog });
  const storage = await StoragePool.open({ dataDir, backing: "loop", sizeMB: 4096, log: testLog });
  const opts: RuncOptions = { dataDir, envdDir: envd, network, storage, log: testLog, ...extra };
  const rt = createRuncRuntime(opts);
  return {
    rt,
    dataDir,
    networkCidr,
    opts,
    storage,
    rootfs,
    spec: (x = {}) => ({ sandboxID: newSandboxID(), templateID: "base", buildID: "test", rootfs, cpuCount: 1, memoryMB: 512, diskSizeMB: 1024, ...x }),
    cleanup: async () => {
      try {
        await rt.sweep(new Set());
        await rt.close?.();
      } finally {
        if (!(await storage.close())) spawnSync("umount", ["-l", join(dataDir, "storage")]);
        const left = leftovers(dataDir);
        // the host firewall lives while the runtime does; with no sandbox left, close removes it
        const table = `sandboxd_${createHash("sha256").update(dataDir).digest("hex").slice(0, 10)}`;
        if (spawnSync("nft", ["list", "table", "inet", table]).status === 0) {
          spawnSync("nft", ["delete", "table", "inet", table]);
          left.push(`nft table inet ${table}`);
        }
        rmSync(dataDir, { recursive: true, force: true });
        if (left.length > 0) throw new Error(`left on the host: ${left.join(", ")}`);
      }
    },
  };
}

/** What a runtime on `dataDir` still has on the host: containers, mounts, veths, cgroups. */
export function leftovers(dataDir: string): string[] {
  const out: string[] = [];
  const runcRoot = join(dataDir, "runc");
  if (existsSync(runcRoot)) {
    const list = JSON.parse(execFileSync("runc", ["--root", runcRoot, "list", "--format", "json"], { encoding: "utf8" }).trim() || "null") as { id: string }[] | null;
    for (const c of list ?? []) out.push(`runc container ${c.id}`);
  }
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const mp = line.split(" ")[4];
    // the storage pool itself is the runtime's while it is open; what it holds is checked below
    if (mp?.startsWith(dataDir + "/") && mp !== join(dataDir, "storage")) out.push(`mount ${mp}`);
  }
  const loops = spawnSync("losetup", ["--list", "--noheadings", "--output", "NAME,BACK-FILE"], { encoding: "utf8" }).stdout;
  for (const line of loops.split("\n")) if (line.includes(` ${dataDir}/`) && !line.trim().endsWith(` ${join(dataDir, "storage.img")}`)) out.push(`loop device ${line.trim()}`);
  const disks = join(dataDir, "storage", "disks");
  for (const f of existsSync(disks) ? readdirSync(disks) : []) out.push(`pool disk ${f}`);
  const slots = join(dataDir, "runtime", "sandboxes");
  for (const f of existsSync(slots) ? readdirSync(slots) : []) {
    const rec = JSON.parse(readFileSync(join(slots, f), "utf8")) as { hostVeth: string };
    if (spawnSync("ip", ["link", "show", "dev", rec.hostVeth]).status === 0) out.push(`veth ${rec.hostVeth}`);
  }
  return out;
}

/** Cgroup directories of one sandbox (or of the instance when `sandboxID` is omitted) still present. */
export function cgroupDirsLike(fragment: string): string[] {
  const out: string[] = [];
  for (const m of cgroupMounts()) {
    const walk = (d: string, depth: number) => {
      if (depth > 3) return;
      let entries;
      try {
        entries = readdirSync(d, { withFileTypes: true });
      } catch {
        // removed meanwhile (other tests' sandboxes and builds come and go while this walks)
        return;
      }
      for (const e of entries) {
        if (!e.isDirectory()) continue;
        if (e.name.includes(fragment)) out.push(join(d, e.name));
        walk(join(d, e.name), depth + 1);
      }
    };
    walk(m, 0);
  }
  return out;
}

/** A process client for envd at ip:49983. */
export function processClient(ip: string): Client<typeof Process> {
  return createClient(Process, createConnectTransport({ baseUrl: `http://${ip}:49983`, httpVersion: "1.1" }));
}

/** What a command run through envd printed and how it ended. */
export interface CmdResult {
  exitCode: number;
  /** envd's status line, e.g. "exit status 1" or "signal: killed". */
  status: string;
  stdout: string;
  stderr: string;
}

/** Runs `bash -c script` in the sandbox through envd's process API as `user` (default root). */
export async function sh(ip: string, script: string, opts: { user?: string; timeoutMs?: number } = {}): Promise<CmdResult> {
  const headers = { authorization: "Basic " + Buffer.from(`${opts.user ?? "root"}:`).toString("base64") };
  let stdout = "";
  let stderr = "";
  let exitCode = -1;
  let status = "no end event";
  const dec = new TextDecoder();
  const stream = processClient(ip).start(
    { process: { cmd: "/bin/bash", args: ["-c", script], envs: {} } },
    { headers, signal: AbortSignal.timeout(opts.timeoutMs ?? 60_000) },
  );
  for await (const r of stream) {
    const ev = r.event?.event;
    if (ev?.case === "data") {
      if (ev.value.output.case === "stdout") stdout += dec.decode(ev.value.output.value);
      if (ev.value.output.case === "stderr") stderr += dec.decode(ev.value.output.value);
    } else if (ev?.case === "end") {
      exitCode = ev.value.exitCode;
      status = ev.value.status;
    }
  }
  return { exitCode, status, stdout, stderr };
}

/** GET /health of envd; the status, or the error's name when it does not answer within `ms`. */
export async function health(ip: string, ms = 2000): Promise<number | string> {
  try {
    return (await fetch(`http://${ip}:49983/health`, { signal: AbortSignal.timeout(ms) })).status;
  } catch (err) {
    return (err as Error).name;
  }
}
