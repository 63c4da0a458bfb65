// A user in the sandbox racing envd (root) through links: while Remove, MakeDir, Move or an upload
// runs, a process of `user` swaps a directory in its path for a link to root's directory or file.
// Root's files must come out unchanged (content, owner, mode), whatever the request answered.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { chmodSync, chownSync, existsSync, lchownSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startDaemon, type Daemon } from "./helpers/daemon.js";
import { basicAuth, clients, tempDir } from "./helpers/clients.js";

/** The sandbox user's uid (1001 on the test host; whatever useradd gave it elsewhere). */
const USER = Number(execFileSync("id", ["-u", "user"], { encoding: "utf8" }).trim());
const ROUND_MS = 2500;

let d: Daemon;
let work: { path: string; cleanup(): void };
let secret: string;
const secrets: string[] = [];
let fs: ReturnType<typeof clients>["fs"]["json"];
const racers = new Set<ChildProcess>();

before(async () => {
  d = await startDaemon();
  fs = clients(d.url).fs.json;
  work = await tempDir("sec-tree");
  chownSync(work.path, USER, USER);
});

/** A new directory of root's, 0700, with a 0644 file: what the racing user must never reach. */
function freshSecret(): string {
  secret = mkdtempSync(join(tmpdir(), "envd-root-secret-"));
  secrets.push(secret);
  chmodSync(secret, 0o700);
  writeFileSync(join(secret, "secret"), "root's data\n", { mode: 0o644 });
  chmodSync(join(secret, "secret"), 0o644);
  return secret;
}

after(async () => {
  for (const r of racers) r.kill("SIGKILL");
  for (const dir of secrets) rmSync(dir, { recursive: true, force: true });
  work.cleanup();
  await d.stop();
});

/** Everything about root's directory that an attack could change. */
function snapshot(): string {
  const describe = (p: string) => {
    const st = lstatSync(p);
    return `${p} ${st.uid}:${st.gid} ${(st.mode & 0o7777).toString(8)} ${st.isFile() ? readFileSync(p, "utf8") : "dir"}`;
  };
  return [describe(secret), ...readdirSync(secret).sort().map((n) => describe(join(secret, n)))].join("\n");
}

/**
 * Runs as `user`, in a tight loop until killed. "replace": each directory in `paths` (a chain,
 * each inside the one before) that envd has just made and not yet handed to the user (still
 * root's) is removed and a link to `target` put in its place; with `rounds`, the paths are
 * relative to the newest directory r<n> in it. "flip": a link to `target` at
 * paths[0] is made and removed again and again. Adds a byte to `status` every 100 loops (so a
 * test knows it raced at all).
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
    if (!st.isDirectory() || st.uid !== 0) continue;
    try {
      fs.rmdirSync(p);
      fs.symlinkSync(target, p);
    } catch {}
  }
}`;

/** Ten nested directories to be made under `base`, outermost first. */
function chain(base: string): string[] {
  const out: string[] = [];
  for (let i = 0, p = base; i < 10; i++) out.push((p = join(p, `c${i}`)));
  return out;
}

/**
 * A link `base`/c0 planted by the user, to `base`/flip/secret, where a request will make a
 * directory: the racer makes `base`/flip a link to root's directory and removes it again, so c0
 * is sometimes dangling (looks missing) and sometimes leads to root's file. Returns flip's path.
 */
function plantFlip(base: string): string {
  const link = join(base, "c0");
  symlinkSync(join(base, "flip", "secret"), link);
  lchownSync(link, USER, USER);
  return join(base, "flip");
}

/** Where a racer counts its loops (one byte per hundred). */
const statusFile = () => join(work.path, "racer-status");

function startRacer(mode: "replace" | "flip", paths: string[], target: string, rounds?: string): ChildProcess {
  rmSync(statusFile(), { force: true });
  const r = spawn(process.execPath, ["-e", RACER, JSON.stringify({ mode, paths, target, status: statusFile(), rounds })], { uid: USER, gid: USER, stdio: "ignore", cwd: "/" });
  racers.add(r);
  return r;
}

async function stopRacer(r: ChildProcess): Promise<void> {
  if (r.exitCode === null && r.signalCode === null) {
    const gone = new Promise((res) => r.once("exit", res));
    r.kill("SIGKILL");
    await gone;
  }
  racers.delete(r);
}

/** Moves `path` (a directory or a link, never followed) out of the way, for removal once no racer runs. */
function setAside(path: string, trash: string): void {
  try {
    renameSync(path, join(trash, `${Date.now()}-${Math.random()}`));
  } catch {
    // not there
  }
}

/** Runs `attempt` for `ms` while `racer` runs; the requests' own outcome does not matter. */
async function race(racer: ChildProcess, attempt: (round: number) => Promise<unknown>, ms = ROUND_MS): Promise<number> {
  // The racer first (a loaded machine can take a second to start node).
  for (const start = Date.now(); !existsSync(statusFile()) && Date.now() - start < 10_000; ) await new Promise((res) => setTimeout(res, 10));
  const until = Date.now() + ms;
  let rounds = 0;
  try {
    while (Date.now() < until) await attempt(rounds++).catch(() => undefined);
  } finally {
    await stopRacer(racer);
  }
  let loops = 0;
  try {
    loops = statSync(statusFile()).size;
  } catch {
    // never ran
  }
  assert.ok(loops > 1, "the racer did not run");
  return rounds;
}

const user = { headers: basicAuth("user") };

/**
 * Runs as `user`; for each line "arm" on stdin, the Remove of `tree` about to start: waits until
 * one of the empty `markers` is gone (the remove is under way: the entries listed before it, in
 * the remove's order, have been looked at and are about to be read), then swaps those
 * subdirectories, nearest first, then the rest, for a link to `target`; answers "swapped <n>".
 */
const SWAPPER = `
const fs = require("node:fs");
const { tree, markers, target } = JSON.parse(process.argv[1]);
require("node:readline").createInterface({ input: process.stdin }).on("line", () => {
  const order = fs.readdirSync(tree);
  process.stdout.write("ready\\n");
  const until = Date.now() + 3000;
  let gone = -1;
  while (gone < 0 && Date.now() < until) for (const m of markers) if (!fs.existsSync(tree + "/" + m)) { gone = order.indexOf(m); break; }
  let swapped = 0;
  for (const name of [...order.slice(0, Math.max(gone, 0)).reverse(), ...order.slice(gone + 1)]) {
    if (markers.includes(name)) continue;
    const p = tree + "/" + name;
    try { fs.renameSync(p, p + ".away"); fs.symlinkSync(target, p); swapped++; } catch {}
  }
  process.stdout.write("swapped " + swapped + "\\n");
});`;

/** Builds a tree of `user`'s: subdirectories with a file each, and empty marker directories. */
function userTree(tree: string, subs: string[], markerNames: string[]): void {
  const markers = markerNames.map((m) => join(tree, m));
  mkdirSync(tree);
  for (const m of markers) mkdirSync(m);
  for (const p of subs) {
    mkdirSync(p);
    writeFileSync(join(p, "f"), "x");
  }
  for (const p of [tree, ...subs, ...subs.map((s) => join(s, "f")), ...markers]) chownSync(p, USER, USER);
}

/** Resolves once `read()` matches `pattern` (polled: the racer answers within milliseconds). */
async function waitFor(read: () => string, pattern: RegExp, r: ChildProcess): Promise<RegExpExecArray> {
  for (;;) {
    const m = pattern.exec(read());
    if (m) return m;
    if (r.exitCode !== null || r.signalCode !== null) throw new Error("the racer exited");
    await new Promise((res) => setTimeout(res, 2));
  }
}

test("Remove of a tree whose subdirectories a user swaps for links to root's directory mid-walk leaves root's files alone", async () => {
  freshSecret();
  const before = snapshot();
  const tree = join(work.path, "rm-race");
  const subs = Array.from({ length: 150 }, (_, i) => join(tree, `d${i}`));
  const markers = Array.from({ length: 5 }, (_, i) => `m${i}`);
  const r = spawn(process.execPath, ["-e", SWAPPER, JSON.stringify({ tree, markers, target: secret })], { uid: USER, gid: USER, cwd: "/", stdio: ["pipe", "pipe", "inherit"] });
  racers.add(r);
  let out = "";
  r.stdout!.setEncoding("utf8").on("data", (c: string) => (out += c));
  let swaps = 0;
  const until = Date.now() + 2 * ROUND_MS;
  try {
    for (let round = 0; round < 30 && Date.now() < until; round++) {
      userTree(tree, subs, markers);
      out = "";
      r.stdin!.write("arm\n");
      await waitFor(() => out, /ready/, r);
      await fs.remove({ path: tree }, user).catch(() => undefined);
      swaps += Number((await waitFor(() => out, /swapped (\d+)/, r))[1]);
      assert.equal(snapshot(), before, `round ${round}`);
      rmSync(tree, { recursive: true, force: true }); // the racer waits for the next "arm": nothing swaps under this
    }
  } finally {
    await stopRacer(r);
  }
  assert.ok(swaps > 0, "the racer never swapped a directory");
});

test("Remove never follows a final link, with or without a trailing slash, nor a link inside the tree", async () => {
  freshSecret();
  const before = snapshot();
  const dir = join(work.path, "rm-links");
  mkdirSync(join(dir, "tree", "sub"), { recursive: true });
  symlinkSync(secret, join(dir, "tree", "sub", "to-root"));
  symlinkSync(secret, join(dir, "link"));
  await fs.remove({ path: join(dir, "link") + "/" }, user);
  assert.throws(() => lstatSync(join(dir, "link")), /ENOENT/, "the link itself is removed");
  await fs.remove({ path: join(dir, "tree") }, user);
  assert.throws(() => lstatSync(join(dir, "tree")), /ENOENT/);
  assert.equal(snapshot(), before);
  rmSync(dir, { recursive: true, force: true });
});

test("MakeDir of new nested directories while a user replaces each new one (or flips a planted link) with a link to root's file chowns nothing of root's", async () => {
  freshSecret();
  const before = snapshot();
  const base = join(work.path, "mk-race");
  const trash = join(work.path, "mk-trash");
  mkdirSync(base);
  chownSync(base, USER, USER);
  mkdirSync(trash);
  const parts = chain(base);
  const racer = startRacer("replace", parts, join(secret, "secret"));
  const rounds = await race(racer, async () => {
    try {
      await fs.makeDir({ path: parts.at(-1)! }, user);
    } finally {
      setAside(parts[0]!, trash);
    }
  });
  assert.ok(rounds > 5, `only ${rounds} MakeDirs ran`);
  assert.equal(snapshot(), before);
  const flip = plantFlip(base);
  const flips = await race(startRacer("flip", [flip], secret), () => fs.makeDir({ path: join(base, "c0", "c1", "c2") }, user));
  assert.ok(flips > 5, `only ${flips} MakeDirs ran`);
  assert.equal(snapshot(), before);
  rmSync(base, { recursive: true, force: true });
  rmSync(trash, { recursive: true, force: true });
});

test("an upload into new nested directories raced both ways chowns nothing of root's", async () => {
  freshSecret();
  const before = snapshot();
  const base = join(work.path, "up-race");
  const trash = join(work.path, "up-trash");
  mkdirSync(base);
  chownSync(base, USER, USER);
  mkdirSync(trash);
  const parts = chain(base);
  const racer = startRacer("replace", parts, join(secret, "secret"));
  const upload = async (path: string) => {
    const url = `${d.url}/files?${new URLSearchParams({ path, username: "user" })}`;
    const res = await fetch(url, { method: "POST", body: "uploaded", headers: { "content-type": "application/octet-stream" } });
    await res.arrayBuffer();
  };
  const rounds = await race(racer, async () => {
    try {
      await upload(join(parts.at(-1)!, "upload.txt"));
    } finally {
      setAside(parts[0]!, trash);
    }
  });
  assert.ok(rounds > 5, `only ${rounds} uploads ran`);
  assert.equal(snapshot(), before);
  const flip = plantFlip(base);
  const flips = await race(startRacer("flip", [flip], secret), () => upload(join(base, "c0", "c1", "upload.txt")));
  assert.ok(flips > 5, `only ${flips} uploads ran`);
  assert.equal(snapshot(), before);
  rmSync(base, { recursive: true, force: true });
  rmSync(trash, { recursive: true, force: true });
});

test("Move into new directories raced with a link to root's directory neither chowns it nor puts the file inside", async () => {
  freshSecret();
  const before = snapshot();
  const base = join(work.path, "mv-race");
  mkdirSync(base);
  chownSync(base, USER, USER);
  // Each round in a new directory r<n>: a link the racer plants after a round has failed must not
  // sit, already in place, on the next round's path (links in existing directories are followed).
  const parts = chain("");
  const racer = startRacer("replace", parts, secret, base);
  const rounds = await race(racer, async (round) => {
    const dir = join(base, `r${round}`);
    mkdirSync(dir);
    chownSync(dir, USER, USER);
    const src = join(base, `src-${round}`);
    writeFileSync(src, "moved");
    try {
      await fs.move({ source: src, destination: join(dir, parts.at(-1)!, "moved") }, user);
    } finally {
      rmSync(src, { force: true });
    }
  });
  assert.ok(rounds > 5, `only ${rounds} moves ran`);
  assert.equal(snapshot(), before);
  rmSync(base, { recursive: true, force: true });
});

test("MakeDir and Move through a dangling link planted where a directory will be made fail and touch nothing", async () => {
  freshSecret();
  const before = snapshot();
  const base = join(work.path, "planted");
  mkdirSync(base);
  symlinkSync(join(secret, "not-yet"), join(base, "x"));
  await assert.rejects(fs.makeDir({ path: join(base, "x/y") }, user));
  writeFileSync(join(base, "src"), "moved");
  await assert.rejects(fs.move({ source: join(base, "src"), destination: join(base, "x/y/dst") }, user));
  assert.equal(snapshot(), before);
  assert.equal(statSync(join(base, "src")).isFile(), true);
  rmSync(base, { recursive: true, force: true });
});
