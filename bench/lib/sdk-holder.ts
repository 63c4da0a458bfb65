/**
 * A child Node process that holds many sandboxes through the published SDK, driven line by line
 * over stdin (grow to a count, check each answers a command, kill them all), each step answered
 * with one JSON line on stdout.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { NODE, ROOT } from "../../test/sandboxd/helpers/sandboxd.js";

const SCRIPT = `
const { Sandbox } = await import("e2b");
const all = [];
const errors = [];
async function pool(items, width, fn) {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < items.length) { const i = next++; await fn(items[i], i); }
  }));
}
async function grow(total, width) {
  const want = Math.max(0, total - all.length);
  let failed = 0;
  const t0 = performance.now();
  // a failed create is counted and retried, up to as many failures as sandboxes asked for
  let left = want;
  await pool(Array.from({ length: width }), width, async () => {
    while (left > 0 && failed < want) {
      left--;
      try { all.push(await Sandbox.create({ timeoutMs: 3_600_000 })); }
      catch (e) { failed++; left++; if (errors.length < 5) errors.push(String(e?.message ?? e).slice(0, 300)); }
    }
  });
  return { held: all.length, failed, ms: performance.now() - t0, errors };
}
async function check(width) {
  let failed = 0;
  await pool(all, width, async (s) => {
    try { const r = await s.commands.run("true"); if (r.exitCode !== 0) failed++; }
    catch (e) { failed++; if (errors.length < 5) errors.push(String(e?.message ?? e).slice(0, 300)); }
  });
  return { checked: all.length, failed, errors };
}
async function killAll(width) {
  await pool(all.splice(0), width, (s) => s.kill().catch(() => undefined));
  return { held: 0 };
}
let buf = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", async (chunk) => {
  buf += chunk;
  for (let i; (i = buf.indexOf("\\n")) >= 0; ) {
    const [verb, a, b] = buf.slice(0, i).trim().split(" ");
    buf = buf.slice(i + 1);
    const out = verb === "grow" ? await grow(Number(a), Number(b)) : verb === "check" ? await check(Number(a)) : verb === "kill" ? await killAll(Number(a)) : { error: "unknown " + verb };
    process.stdout.write(JSON.stringify(out) + "\\n");
  }
});
process.stdin.on("end", () => process.exit(0));
`;

/** What a step answered. */
export type HolderAnswer = Record<string, unknown>;

/** The holder process and its one-step-at-a-time driver. */
export interface SdkHolder {
  /** Sends one command line and resolves with its JSON answer. */
  step(line: string): Promise<HolderAnswer>;
  /** Closes stdin and waits for the process to end. */
  close(): Promise<void>;
}

/** Starts the holder with the SDK's environment (domain, key, CA). */
export function startHolder(env: Record<string, string>): SdkHolder {
  const child: ChildProcess = spawn(NODE, ["--input-type=module", "-e", SCRIPT], {
    cwd: ROOT,
    env: { ...process.env, ...env, E2B_DEBUG: "", E2B_API_URL: "", E2B_SANDBOX_URL: "" },
    stdio: ["pipe", "pipe", "pipe"],
  });
  // a run told to end (or ending) stops the holder at once: left alone it would go on creating
  // sandboxes while the run sweeps them
  const stop = (sig?: unknown) => {
    child.kill("SIGKILL");
    // no one else handles the signal: end as it would have without this listener
    if ((sig === "SIGINT" || sig === "SIGTERM") && process.listenerCount(sig) === 0) process.kill(process.pid, sig);
  };
  for (const sig of ["SIGINT", "SIGTERM", "exit"] as const) process.once(sig, stop);
  let out = "";
  let err = "";
  const waiting: { resolve(a: HolderAnswer): void; reject(e: Error): void }[] = [];
  child.stderr!.on("data", (c: Buffer) => (err = (err + c).slice(-4000)));
  child.stdout!.on("data", (c: Buffer) => {
    out += c;
    for (let i; (i = out.indexOf("\n")) >= 0; ) {
      const line = out.slice(0, i);
      out = out.slice(i + 1);
      waiting.shift()?.resolve(JSON.parse(line) as HolderAnswer);
    }
  });
  // one exit listener for every step still waiting (not one per step: a long run would pile them up)
  const exited = new Promise<void>((resolve) => child.once("exit", () => {
    for (const w of waiting.splice(0)) w.reject(new Error(`the SDK holder exited: ${err}`));
    resolve();
  }));
  return {
    step(line) {
      return new Promise((resolve, reject) => {
        if (child.exitCode !== null) return reject(new Error(`the SDK holder has exited: ${err}`));
        waiting.push({ resolve, reject });
        child.stdin!.write(line + "\n");
      });
    },
    async close() {
      child.stdin!.end();
      await exited;
      for (const sig of ["SIGINT", "SIGTERM", "exit"] as const) process.off(sig, stop);
    },
  };
}
