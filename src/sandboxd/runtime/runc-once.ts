/**
 * The runc backend's run-once verb: one command run to its end with `runc run` in a root
 * filesystem the caller mounted (a template build's step), isolated as a sandbox is (user
 * namespace, the sandboxes' capabilities and seccomp profile, a network namespace with only
 * loopback, tini as PID 1) under the run's own limits, its output streamed line by line. Runs keep
 * a runc state root, bundle directory and cgroup parent of their own, apart from the sandboxes',
 * so a sweep of sandboxes never meets one.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { removeCgroup } from "../host/cgroups.js";
import { execTool } from "../host/exec.js";
import { withOomFloor } from "../host/oom.js";
import { ENVD_MOUNT, ociConfig } from "./oci-config.js";
import type { RunOnceResult, RunOnceSpec } from "./runtime.js";

/** A run's name: what runc accepts as a container ID, short enough for a hostname. */
const RUN_ID = /^[a-z0-9][a-z0-9-]{0,63}$/;

/** The longest line passed on whole; a longer one is cut, so that none grows without bound. */
const MAX_LINE = 4096;

/**
 * The cgroup parent of a data dir's runs: named by the data dir, so that a restart after a crash
 * finds (and removes) what the last process left.
 */
export function runCgroupParent(dataDir: string): string {
  return `sandboxd-build-${createHash("sha256").update(resolve(dataDir)).digest("hex").slice(0, 10)}`;
}

/** Splits a stream into lines for `onLine` (a trailing "\r" dropped, a line past MAX_LINE cut). */
function lines(stream: NodeJS.ReadableStream, onLine: (line: string) => void): void {
  let rest = "";
  stream.setEncoding("utf8");
  stream.on("data", (d: string) => {
    const got = (rest + d).split("\n");
    rest = got.pop() ?? "";
    if (rest.length > MAX_LINE) got.push(rest.slice(0, MAX_LINE)), (rest = "");
    for (const l of got) onLine(l.replace(/\r$/, ""));
  });
  stream.on("end", () => rest && onLine(rest));
}

/** The runs of one runc runtime. */
export class RuncRuns {
  private readonly root: string;
  private readonly bundles: string;
  private readonly cgroupParent: string;
  private readonly live = new Set<string>();

  constructor(dataDir: string, private readonly tiniPath: string) {
    this.root = join(dataDir, "runc-build");
    this.bundles = join(dataDir, "runtime", "runs");
    this.cgroupParent = runCgroupParent(dataDir);
  }

  /** Runs `s` (see Runtime.runOnce). */
  async run(s: RunOnceSpec, signal?: AbortSignal): Promise<RunOnceResult> {
    if (!RUN_ID.test(s.runID)) throw new Error(`run ID '${s.runID}' is not [a-z0-9-] of at most 64`);
    if (this.live.has(s.runID)) throw new Error(`run ${s.runID} is already running`);
    signal?.throwIfAborted();
    this.live.add(s.runID);
    const bundle = join(this.bundles, s.runID);
    try {
      mkdirSync(bundle, { recursive: true, mode: 0o700 });
      writeFileSync(join(bundle, "config.json"), JSON.stringify(this.config(s)));
      return await this.spawn(s, bundle, signal);
    } finally {
      await execTool("runc", ["--root", this.root, "delete", "--force", s.runID]);
      rmSync(bundle, { recursive: true, force: true });
      this.live.delete(s.runID);
      // the parent cgroup goes with the last run (runc makes it again for the next)
      if (this.live.size === 0) removeCgroup(`/${this.cgroupParent}`);
    }
  }

  /** A sandbox's config.json with the command (under tini) in place of envd, and the run's limits and mounts. */
  private config(s: RunOnceSpec): object {
    const base = ociConfig({
      sandboxID: s.runID, rootfsDir: s.rootfs, envdDir: "/nonexistent", tiniPath: this.tiniPath, cgroupsPath: `/${this.cgroupParent}/${s.runID}`,
      cpuCount: s.cpuCount, memoryMB: s.memoryMB, pidsLimit: s.pidsLimit, defaultUser: "root",
    }) as { process: Record<string, unknown>; mounts: { destination: string }[] };
    base.process = {
      ...base.process,
      args: [(base.process.args as string[])[0], "--", ...s.argv],
      user: s.user,
      env: Object.entries(s.env).map(([k, v]) => `${k}=${v}`),
      cwd: s.cwd,
    };
    base.mounts = [
      ...base.mounts.filter((m) => m.destination !== ENVD_MOUNT),
      ...(s.binds ?? []).map((b) => ({ destination: b.destination, type: "bind", source: b.source, options: ["rbind", "ro", "nosuid", "nodev"] })),
    ];
    return base;
  }

  /** `runc run` in the foreground, killed by the timeout or the signal. */
  private async spawn(s: RunOnceSpec, bundle: string, signal?: AbortSignal): Promise<RunOnceResult> {
    // behind the sandboxes' OOM floor: the run's processes must not inherit sandboxd's own
    const argv = withOomFloor(["runc", "--root", this.root, "run", "--bundle", bundle, s.runID]);
    const child = spawn(argv[0], argv.slice(1), { stdio: ["ignore", "pipe", "pipe"] });
    const kill = () => void execTool("runc", ["--root", this.root, "kill", s.runID, "KILL"]).then(() => child.kill("SIGKILL"));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, s.timeoutMs);
    signal?.addEventListener("abort", kill, { once: true });
    lines(child.stdout, s.onLine);
    lines(child.stderr, s.onLine);
    try {
      const exitCode = await new Promise<number | null>((res, rej) => {
        child.once("error", rej);
        child.once("close", (code) => res(code));
      });
      return { exitCode, timedOut };
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", kill);
    }
  }

  /** Removes the containers, bundles and cgroups of runs that are not live in this process. */
  async sweep(): Promise<void> {
    const r = await execTool("runc", ["--root", this.root, "list", "-q"]);
    for (const id of r.code === 0 ? r.stdout.split("\n").filter(Boolean) : []) {
      if (!this.live.has(id)) await execTool("runc", ["--root", this.root, "delete", "--force", id]);
    }
    for (const id of existsSync(this.bundles) ? readdirSync(this.bundles) : []) {
      if (!this.live.has(id)) rmSync(join(this.bundles, id), { recursive: true, force: true });
    }
    if (this.live.size === 0) removeCgroup(`/${this.cgroupParent}`);
  }
}
