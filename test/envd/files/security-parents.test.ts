// Parents envd (root) makes for a user where the user may not write (a write to /0/file as
// `user`), raced by a process of that user: links put where a new directory was just made must
// never lead envd to make anything in root's directories. Each new directory is the user's from
// its creation: nothing is chowned.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, chownSync, lstatSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { basicAuth, clients, tempDir } from "../helpers/clients.js";
import { chain, killRacers, race, setAside, startRacer } from "../helpers/link-racer.js";

/** The sandbox user's uid and gid (1001 on the test host; whatever useradd gave it elsewhere). */
const USER = Number(execFileSync("id", ["-u", "user"], { encoding: "utf8" }).trim());
const USER_GID = Number(execFileSync("id", ["-g", "user"], { encoding: "utf8" }).trim());
const user = { headers: basicAuth("user") };

let d: Daemon;
let work: { path: string; cleanup(): void };
let fs: ReturnType<typeof clients>["fs"]["json"];

before(async () => {
  d = await startDaemon();
  fs = clients(d.url).fs.json;
  work = await tempDir("sec-parents");
  chownSync(work.path, USER, USER_GID);
});

after(async () => {
  killRacers();
  work?.cleanup();
  await d?.stop();
});

/** A directory of root's, 0755 (the user may look but not write), holding a file of root's. */
function rootDir(path: string): string {
  mkdirSync(path, { mode: 0o755 });
  chmodSync(path, 0o755);
  writeFileSync(join(path, "marker"), "root's\n", { mode: 0o644 });
  return path;
}

/** What is in a directory of root's, with owners: what an attack could change. */
function listing(dir: string): string {
  return readdirSync(dir)
    .sort()
    .map((n) => {
      const st = lstatSync(join(dir, n));
      return `${n} ${st.uid}:${st.gid} ${(st.mode & 0o7777).toString(8)}`;
    })
    .join("\n");
}

function upload(path: string): Promise<number> {
  const url = `${d.url}/files?${new URLSearchParams({ path, username: "user" })}`;
  return fetch(url, { method: "POST", body: "uploaded", headers: { "content-type": "application/octet-stream" } }).then(async (r) => {
    await r.arrayBuffer();
    return r.status;
  });
}

test("parents made for the user under root's directory, raced by links to root's directory in each new one, make nothing there", async () => {
  // The request's base is root's: the user's own mkdir fails there, so envd makes c0 and the rest.
  const base = rootDir(join(work.path, "root-base"));
  const target = rootDir(join(work.path, "root-target"));
  const trash = join(work.path, "trash");
  mkdirSync(trash);
  const before = listing(target);
  const parts = chain(base);
  // c0 is in root's base, out of the user's reach; from c1 on, each is inside one of the user's.
  const racer = startRacer({ mode: "replace", paths: parts.slice(1), target, statusDir: work.path, uid: USER, gid: USER_GID });
  const rounds = await race(racer, work.path, async (round) => {
    try {
      if (round % 2 === 0) await fs.makeDir({ path: parts.at(-1)! }, user);
      else await upload(join(parts.at(-1)!, "up.txt"));
    } finally {
      setAside(parts[0]!, trash);
    }
  }, 0, 60);
  assert.equal(rounds, 60);
  assert.equal(listing(target), before, "root's directory is unchanged");
  assert.equal(listing(base), "marker 0:0 644");
  // Not raced: the same requests make every directory, each the user's.
  await fs.makeDir({ path: parts.at(-1)! }, user);
  assert.equal(await upload(join(parts.at(-1)!, "up.txt")), 200);
  for (const p of parts) assert.equal(`${lstatSync(p).uid}:${lstatSync(p).gid}`, `${USER}:${USER_GID}`, p);
  rmSync(trash, { recursive: true, force: true });
});
