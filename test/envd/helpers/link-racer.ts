import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, renameSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";

/** How long one race runs its requests against the racer. */
export const ROUND_MS = 2500;

/**
 * Runs as the sandbox user, in a tight loop until killed. "replace": each directory in `paths`
 * (a chain, each inside the one before) that exists is removed (when empty: one envd has just
 * made) and a link to `target` put in its place; with `rounds`, the paths are relative to the
 * newest directory r<n> in it. "flip": a link to `target` at paths[0] is made and removed again
 * and again. Adds a byte to `status` every 100 loops (so a test knows it raced at all).
 */
const RACER = `
const fs = require("node:fs");
const { mode, target, status, rounds } = JSON.parse(process.argv[1]);
let { paths } = JSON.parse(process.argv[1]);
const parent = process.ppid, deadline = Date.now() + 60000;
for (let loops = 1; ; loops++) {
  if (loops % 100 === 1) fs.appendFileSync(status, ".");
  // Never outlives the test: not if the test process is killed, not past a minute.
  if (loops % 100 === 1 && (process.ppid !== parent || Date.now() > deadline)) process.exit(0);
  if (rounds) {
    // Relative paths, under the newest round directory: a link planted late lands in an old one.
    let newest = -1;
    try { for (const n of fs.readdirSync(rounds)) if (/^r\\d+$/.test(n)) newest = Math.max(newest, Number(n.slice(1))); } catch {}
    if (newest < 0) continue;
    paths = JSON.parse(process.argv[1]).paths.map((p) => rounds + "/r" + newest + "/" + p);
  }
  if (mode === "flip") {
    try { fs.symlinkSync(target, paths[0]); } catch {}
    try { fs.unlinkSync(paths[0]); } catch {}
    continue;
  }
  for (const p of paths) {
    let st;
    try { st = fs.lstatSync(p); } catch { break; }
    if (!st.isDirectory()) continue;
    try {
      fs.rmdirSync(p);
      fs.symlinkSync(target, p);
    } catch {}
  }
}`;

const running = new Set<ChildProcess>();

/** Where a racer counts its loops (one byte per hundred): a file in `dir`. */
export function statusFile(dir: string): string {
  return join(dir, "racer-status");
}

/** Options of a racer: see RACER for the modes. */
export interface RacerOptions {
  mode: "replace" | "flip";
  paths: string[];
  target: string;
  /** The directory its status file goes in (the user must be able to write it). */
  statusDir: string;
  /** The user it runs as. */
  uid: number;
  gid: number;
  rounds?: string;
}

/** Starts a racer as the user; stopRacer (or killRacers) ends it. */
export function startRacer(o: RacerOptions): ChildProcess {
  rmSync(statusFile(o.statusDir), { force: true });
  const args = JSON.stringify({ mode: o.mode, paths: o.paths, target: o.target, status: statusFile(o.statusDir), rounds: o.rounds });
  const r = spawn(process.execPath, ["-e", RACER, args], { uid: o.uid, gid: o.gid, stdio: "ignore", cwd: "/" });
  running.add(r);
  return r;
}

/** Ends a racer and waits for it to be gone. */
export async function stopRacer(r: ChildProcess): Promise<void> {
  if (r.exitCode === null && r.signalCode === null) {
    const gone = new Promise((res) => r.once("exit", res));
    r.kill("SIGKILL");
    await gone;
  }
  running.delete(r);
}

/** Kills every racer still running (a test's `after`). */
export function killRacers(): void {
  for (const r of running) r.kill("SIGKILL");
  running.clear();
}

/** Moves `path` (a directory or a link, never followed) out of the way, for removal once no racer runs. */
export function setAside(path: string, trash: string): void {
  try {
    renameSync(path, join(trash, `${Date.now()}-${Math.random()}`));
  } catch {
    // not there
  }
}

/** Ten nested directories to be made under `base`, outermost first. */
export function chain(base: string): string[] {
  const out: string[] = [];
  for (let i = 0, p = base; i < 10; i++) out.push((p = join(p, `c${i}`)));
  return out;
}

/**
 * Runs `attempt` while `racer` (with its status file in `statusDir`) runs: for `ms`, or, with
 * `count`, that many times however long they take. The requests' own outcome does not matter.
 */
export async function race(racer: ChildProcess, statusDir: string, attempt: (round: number) => Promise<unknown>, ms = ROUND_MS, count?: number): Promise<number> {
  const status = statusFile(statusDir);
  // The racer first (a loaded machine can take a second to start node).
  for (const start = Date.now(); !existsSync(status) && Date.now() - start < 10_000; ) await new Promise((res) => setTimeout(res, 10));
  const until = Date.now() + ms;
  let rounds = 0;
  const more = () => (count === undefined ? Date.now() < until : rounds < count);
  try {
    while (more()) await attempt(rounds++).catch(() => undefined);
  } finally {
    await stopRacer(racer);
  }
  let loops = 0;
  try {
    loops = statSync(status).size;
  } catch {
    // never ran
  }
  assert.ok(loops > 1, "the racer did not run");
  return rounds;
}
