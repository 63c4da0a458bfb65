import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** Repository root (build/test/envd/helpers → ../../../..). */
export const ROOT = resolve(fileURLToPath(new URL("../../../..", import.meta.url)));
/** The daemon under test: dist/envd, which ./build.sh makes (a link to envd.cjs, which loads envd-rest.cjs beside it). */
export const ENVD_BIN = join(ROOT, "dist", "envd");
/** The entry bundle: it runs anywhere as `node <file>` with envd-rest.cjs beside it (addons are looked up). */
export const ENVD_BUNDLE = join(ROOT, "dist", "envd.cjs");
/** What the entry bundle loads once it listens. */
export const ENVD_REST_BUNDLE = join(ROOT, "dist", "envd-rest.cjs");

/** A running daemon started for a test. */
export interface Daemon {
  readonly port: number;
  readonly url: string;
  readonly pid: number;
  readonly proc: ChildProcess;
  /** A per-daemon scratch dir (run dir etc.), removed by stop(). */
  readonly scratch: string;
  /** Everything the daemon printed so far (stdout and stderr). */
  logs(): string;
  /** SIGTERM, wait for exit (SIGKILL after 8 s); resolves with the exit code. */
  stop(): Promise<number | null>;
}

/** Options for startDaemon. */
export interface StartOptions {
  args?: string[];
  env?: Record<string, string>;
  /** Run with the systemd unit's priorities (packaging/envd.service: Nice=-20, realtime IO class 4). */
  unitPriorities?: boolean;
  /** A command the daemon is started through (it must exec its arguments, so the pid stays the daemon's). */
  prefix?: string[];
  /** Another build of the daemon to start instead of dist/envd (the release executable, say). */
  bin?: string;
}

/** The unit's Nice= (packaging/envd.service). */
export const UNIT_NICE = -20;

/** The unit's Nice= and IOScheduling*= as a command prefix (each step execs: the pid is envd's). */
export const UNIT_PRIORITIES = ["nice", "-n", String(UNIT_NICE), "ionice", "-c", "1", "-n", "4"];

/** Starts dist/envd on a free port with test-safe defaults and waits until it listens. */
export async function startDaemon(opts: StartOptions = {}): Promise<Daemon> {
  const scratch = mkdtempSync(join(tmpdir(), "envd-daemon-"));
  const args = [
    "--port", "0",
    "--default-user", "user",
    "--default-workdir", "/home/user",
    "--clock", "off",
    "--run-dir", join(scratch, "run"),
    "--hosts-file", join(scratch, "hosts"),
    "--ca-bundle", join(scratch, "ca-bundle.crt"),
    "--ca-cert", join(scratch, "e2b-ca.crt"),
    ...(opts.args ?? []),
  ];
  const [file, ...argv] = [...(opts.prefix ?? []), ...(opts.unitPriorities ? UNIT_PRIORITIES : []), opts.bin ?? ENVD_BIN, ...args];
  const proc = spawn(file, argv, { env: { ...process.env, ...opts.env }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  proc.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  proc.stderr!.setEncoding("utf8").on("data", (d: string) => (out += d));
  const exited = new Promise<number | null>((r) => proc.once("exit", (code) => r(code)));
  // Started means listening and, where the level logs it, the rest loaded (as a first request
  // other than GET /health would wait for).
  const level = args[args.lastIndexOf("--log-level") + 1];
  const ready = args.includes("--log-level") && !["trace", "debug", "info"].includes(level) ? () => true : () => out.includes('"msg":"loaded"');
  const port = await new Promise<number>((resolvePort, reject) => {
    const timer = setTimeout(() => reject(new Error(`daemon did not start in 15 s:\n${out}`)), 15_000);
    const check = () => {
      const m = /"port":(\d+)[^\n]*"msg":"listening"/.exec(out);
      if (m && ready()) {
        clearTimeout(timer);
        proc.stdout!.off("data", check);
        resolvePort(Number(m[1]));
      }
    };
    proc.stdout!.on("data", check);
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`daemon exited with ${code} before listening:\n${out}`));
    });
  });
  let stopped: Promise<number | null> | undefined;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    pid: proc.pid!,
    proc,
    scratch,
    logs: () => out,
    stop() {
      stopped ??= (async () => {
        if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
        const kill = setTimeout(() => proc.kill("SIGKILL"), 8000);
        const code = await exited;
        clearTimeout(kill);
        rmSync(scratch, { recursive: true, force: true });
        return code;
      })();
      return stopped;
    },
  };
}
