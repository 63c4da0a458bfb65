// A user in the sandbox racing envd (root) through links: while Remove, MakeDir, Move or an upload
// runs, a process of `user` swaps a directory in its path for a link to root's directory or file.
// Root's files must come out unchanged (content, owner, mode), whatever the request answered.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { chmodSync, chownSync, lchownSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { basicAuth, clients, tempDir } from "../helpers/clients.js";
import { chain, killRacers, race as raceLinks, ROUND_MS, setAside, startRacer as startLinkRacer, stopRacer } from "../helpers/link-racer.js";

/** The sandbox user's uid (1001 on the test host; whatever useradd gave it elsewhere). */
const USER = Number(execFileSync("id", ["-u", "user"], { encoding: "utf8" }).trim());

let d: Daemon;
let work: { path: string; cleanup(): void };
let secret: string;
const secrets: string[] = [];
let fs: ReturnType<typeof clients>["fs"]["json"];
/** The Remove swappers, killed at the end whatever happened. */
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
  killRacers();
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

/** A racer as `user`, its status file in the work directory. */
function startRacer(mode: "replace" | "flip", paths: string[], target: string, rounds?: string): ChildProcess {
  return startLinkRacer({ mode, paths, target, rounds, statusDir: work.path, uid: USER, gid: USER });
}

/** Attempts per race: a count, not a time window, so a loaded machine runs as many as an idle one. */
const ATTEMPTS = 40;

/** Runs `attempt` ATTEMPTS times while `racer` runs (see link-racer's race). */
function race(racer: ChildProcess, attempt: (round: number) => Promise<unknown>): Promise<number> {
  return raceLinks(racer, work.path, attempt, undefined, ATTEMPTS);
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
  assert.equal(rounds, ATTEMPTS);
  assert.equal(snapshot(), before);
  const flip = plantFlip(base);
  const flips = await race(startRacer("flip", [flip], secret), () => fs.makeDir({ path: join(base, "c0", "c1", "c2") }, user));
  assert.equal(flips, ATTEMPTS);
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
  assert.equal(rounds, ATTEMPTS);
  assert.equal(snapshot(), before);
  const flip = plantFlip(base);
  const flips = await race(startRacer("flip", [flip], secret), () => upload(join(base, "c0", "c1", "upload.txt")));
  assert.equal(flips, ATTEMPTS);
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
  assert.equal(rounds, ATTEMPTS);
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
