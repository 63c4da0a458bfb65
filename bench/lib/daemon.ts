import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ENVD_BIN as BUILT_BIN, startDaemon, UNIT_PRIORITIES } from "../../test/envd/helpers/daemon.js";

export { ROOT } from "../../test/envd/helpers/daemon.js";

/**
 * The daemon the bench measures: dist/envd, or another build named by ENVD_BENCH_BIN (to
 * compare a candidate fix against the current build with the same scenarios).
 */
export const ENVD_BIN = process.env.ENVD_BENCH_BIN || BUILT_BIN;

/** The part of the test helper's Daemon the bench uses. */
export interface BenchDaemonProcess {
  readonly url: string;
  readonly pid: number;
  stop(): Promise<unknown>;
}

let extraEnv: Record<string, string> = {};

/** Environment added to every daemon the bench starts (e.g. a profiling preload). */
export function setDaemonEnv(env: Record<string, string>): void {
  extraEnv = env;
}

/** The environment added to daemons by setDaemonEnv. */
export function daemonEnv(): Record<string, string> {
  return extraEnv;
}

/** The test helper's flags, with scratch paths under `dir`. */
export function daemonArgs(port: number, dir: string): string[] {
  return [
    "--port", String(port), "--default-user", "user", "--default-workdir", "/home/user", "--clock", "off",
    "--run-dir", join(dir, "run"), "--hosts-file", join(dir, "hosts"),
    "--ca-bundle", join(dir, "ca-bundle.crt"), "--ca-cert", join(dir, "e2b-ca.crt"),
  ];
}

/** Starts ENVD_BENCH_BIN like the test helper starts dist/envd, with its unit's priorities if asked (port from its "listening" log line). */
async function startOther(unitPriorities = false): Promise<BenchDaemonProcess> {
  const scratch = mkdtempSync(join(tmpdir(), "envd-bench-daemon-"));
  const [file, ...argv] = unitPriorities ? [...UNIT_PRIORITIES, ENVD_BIN, ...daemonArgs(0, scratch)] : [ENVD_BIN, ...daemonArgs(0, scratch)];
  const proc = spawn(file, argv, { env: { ...process.env, ...extraEnv }, stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  const port = await new Promise<number>((resolve, reject) => {
    proc.stdout!.setEncoding("utf8").on("data", (d: string) => {
      out += d;
      const m = /"port":(\d+)[^\n]*"msg":"listening"/.exec(out);
      if (m) resolve(Number(m[1]));
      if (out.length > 65536) out = out.slice(-4096);
    });
    proc.once("exit", (code) => reject(new Error(`${ENVD_BIN} exited with ${code} before listening`)));
  });
  const exited = new Promise((r) => proc.once("exit", r));
  return {
    url: `http://127.0.0.1:${port}`,
    pid: proc.pid!,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
      await exited;
      rmSync(scratch, { recursive: true, force: true });
    },
  };
}

/** A daemon started for one scenario. */
export interface BenchDaemon {
  daemon: BenchDaemonProcess;
}

/**
 * Starts a fresh daemon, runs `fn`, and always stops it, so one scenario's leftovers never
 * skew the next one's memory or latency.
 */
export async function withDaemon<T>(fn: (d: BenchDaemon) => Promise<T>, opts: { unitPriorities?: boolean } = {}): Promise<T> {
  const daemon = process.env.ENVD_BENCH_BIN ? await startOther(opts.unitPriorities) : await startDaemon({ env: extraEnv, unitPriorities: opts.unitPriorities });
  try {
    return await fn({ daemon });
  } finally {
    await daemon.stop();
  }
}
