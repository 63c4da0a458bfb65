import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { execTool } from "../host/exec.js";
import { ENVD_MOUNT, ociConfig } from "../runtime/oci-config.js";
import { readFileInRoot } from "../host/in-root.js";
import { withOomFloor } from "../host/oom.js";

/** One command to run in a build sandbox over a mounted layer stack. */
export interface BuildCommand {
  /** Container ID (unique per run). */
  id: string;
  /** Directory for the bundle's config.json. */
  bundleDir: string;
  /** The mounted overlay the command sees as `/`. */
  rootfs: string;
  runcRoot: string;
  tiniPath: string;
  cgroupParent: string;
  memoryMB: number;
  argv: string[];
  /** User name or numeric uid[:gid], resolved in the rootfs's /etc/passwd. */
  user: string;
  env: Record<string, string>;
  cwd: string;
  /** Host directories bind-mounted read-only inside. */
  binds?: { source: string; destination: string }[];
  timeoutMs: number;
  signal?: AbortSignal;
  /** Each line the command prints (stdout and stderr). */
  onLine(line: string): void;
}

/** The most of a rootfs's /etc/passwd read to look a user up. */
const MAX_PASSWD_BYTES = 4 << 20;

/** A user's uid, gid and home as the rootfs's /etc/passwd says; undefined when it has no such user. */
export function lookupUser(rootfs: string, user: string): { uid: number; gid: number; home: string } | undefined {
  const numeric = /^(\d+)(?::(\d+))?$/.exec(user);
  if (numeric) return { uid: Number(numeric[1]), gid: Number(numeric[2] ?? numeric[1]), home: "/" };
  let passwd: string;
  try {
    // resolved inside the rootfs without following links: a layer's etc could point at the host's
    passwd = readFileInRoot(rootfs, "etc/passwd", MAX_PASSWD_BYTES).toString("utf8");
  } catch {
    return undefined;
  }
  for (const line of passwd.split("\n")) {
    const f = line.split(":");
    if (f[0] === user && f.length >= 7) return { uid: Number(f[2]), gid: Number(f[3]), home: f[5] || "/" };
  }
  return undefined;
}

/**
 * Runs one command in a build sandbox: `runc run` of a bundle like a sandbox's (user namespace,
 * the same limits and seccomp profile, a network namespace with only loopback, tini as PID 1)
 * but with the command in place of envd. Resolves with its exit code (null: killed); a timeout
 * or an abort kills it.
 */
export async function runInBuild(c: BuildCommand): Promise<number | null> {
  const who = lookupUser(c.rootfs, c.user);
  if (!who) throw new Error(`user '${c.user}' does not exist in the image`);
  const base = ociConfig({
    sandboxID: c.id, rootfsDir: c.rootfs, envdDir: "/nonexistent", tiniPath: c.tiniPath, cgroupsPath: `/${c.cgroupParent}/${c.id}`,
    cpuCount: 2, memoryMB: c.memoryMB, pidsLimit: 4096, defaultUser: "root",
  }) as { process: Record<string, unknown>; mounts: { destination: string }[] };
  const env = { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", HOME: who.home, USER: c.user, ...c.env };
  base.process = {
    ...base.process,
    args: [(base.process.args as string[])[0], "--", ...c.argv],
    user: { uid: who.uid, gid: who.gid },
    env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
    cwd: c.cwd,
  };
  base.mounts = [
    ...base.mounts.filter((m) => m.destination !== ENVD_MOUNT),
    ...(c.binds ?? []).map((b) => ({ destination: b.destination, type: "bind", source: b.source, options: ["rbind", "ro", "nosuid", "nodev"] })),
  ];
  writeFileSync(join(c.bundleDir, "config.json"), JSON.stringify(base));
  // behind the sandboxes' OOM floor: the build's processes must not inherit sandboxd's own
  const argv = withOomFloor(["runc", "--root", c.runcRoot, "run", "--bundle", c.bundleDir, c.id]);
  const child = spawn(argv[0], argv.slice(1), { stdio: ["ignore", "pipe", "pipe"] });
  const kill = () => void execTool("runc", ["--root", c.runcRoot, "kill", c.id, "KILL"]).then(() => child.kill("SIGKILL"));
  const timer = setTimeout(() => {
    c.onLine(`killed after ${Math.round(c.timeoutMs / 1000)} s`);
    kill();
  }, c.timeoutMs);
  c.signal?.addEventListener("abort", kill, { once: true });
  for (const stream of [child.stdout, child.stderr]) {
    let rest = "";
    stream.setEncoding("utf8");
    stream.on("data", (d: string) => {
      const lines = (rest + d).split("\n");
      rest = lines.pop() ?? "";
      // a line without an end is cut so that one never grows without bound
      if (rest.length > 4096) lines.push(rest.slice(0, 4096)), (rest = "");
      for (const l of lines) c.onLine(l.replace(/\r$/, ""));
    });
    stream.on("end", () => rest && c.onLine(rest));
  }
  try {
    return await new Promise<number | null>((resolve, reject) => {
      child.once("error", reject);
      child.once("close", (code) => resolve(code));
    });
  } finally {
    clearTimeout(timer);
    c.signal?.removeEventListener("abort", kill);
    await execTool("runc", ["--root", c.runcRoot, "delete", "--force", c.id]);
  }
}
