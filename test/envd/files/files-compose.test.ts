import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { tempDir } from "../helpers/clients.js";

let d: Daemon;
let dir: { path: string; cleanup(): void };
let mount: string | undefined;

before(async () => {
  d = await startDaemon();
  dir = await tempDir("files-compose");
});

after(async () => {
  if (mount) {
    execFileSync("umount", [mount]);
    rmSync(mount, { recursive: true, force: true });
  }
  dir.cleanup();
  await d.stop();
});

const compose = (body: unknown) =>
  fetch(`${d.url}/files/compose`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

/** Makes what a sandbox user made: owned by `user` (uid 1001), as compose acts as that user. */
function own<T extends string>(path: T): T {
  chownSync(path, 1001, 1001);
  return path;
}

function sources(sub: string, parts: string[]): string[] {
  mkdirSync(join(dir.path, sub), { recursive: true });
  own(join(dir.path, sub));
  return parts.map((content, i) => {
    const p = join(dir.path, sub, `part${i}`);
    writeFileSync(p, content);
    return own(p);
  });
}

test("compose concatenates in order, creates parents, deletes sources", async () => {
  const src = sources("ok", ["alpha-", "beta-", "gamma"]);
  const dest = join(dir.path, "ok", "new", "deeper", "joined.txt");
  const r = await compose({ source_paths: src, destination: dest });
  assert.equal(r.status, 200);
  assert.equal(r.headers.get("content-type"), "application/json");
  assert.equal(await r.text(), JSON.stringify({ path: dest, name: "joined.txt", type: "file" }) + "\n");
  assert.equal(readFileSync(dest, "utf8"), "alpha-beta-gamma");
  for (const s of src) assert.equal(existsSync(s), false);
  assert.equal(statSync(dest).uid, 1001);
  assert.equal(statSync(join(dir.path, "ok", "new")).uid, 1001);
  assert.deepEqual(readdirSync(join(dir.path, "ok", "new", "deeper")), ["joined.txt"]);

  // Relative paths resolve against the user's home; an existing destination is replaced.
  const home = join("/home/user", `envd-compose-${process.pid}`);
  mkdirSync(home, { recursive: true });
  own(home);
  try {
    for (const [name, content] of [["a", "1"], ["b", "2"], ["out", "old"]]) {
      writeFileSync(join(home, name), content);
      own(join(home, name));
    }
    const rel = `envd-compose-${process.pid}`;
    const rr = await compose({ source_paths: [`${rel}/a`, `${rel}/b`], destination: `${rel}/out` });
    assert.equal(rr.status, 200);
    assert.equal(readFileSync(join(home, "out"), "utf8"), "12");
    const asRoot = await compose({ source_paths: [join(home, "out")], destination: join(home, "root-out"), username: "root" });
    assert.equal(asRoot.status, 200);
    assert.equal(statSync(join(home, "root-out")).uid, 0);
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

test("compose of multi-chunk sources keeps every byte in order (one read buffer is reused)", async () => {
  mkdirSync(join(dir.path, "big"), { recursive: true });
  own(join(dir.path, "big"));
  const parts = [700_000, 262_144, 5, 1_000_001].map((n) => randomBytes(n));
  const src = parts.map((b, i) => {
    const p = join(dir.path, "big", `part${i}`);
    writeFileSync(p, b);
    return own(p);
  });
  const dest = join(dir.path, "big", "joined.bin");
  const r = await compose({ source_paths: src, destination: dest });
  assert.equal(r.status, 200);
  assert.ok(readFileSync(dest).equals(Buffer.concat(parts)));
});

test("compose request errors are 400/401 with the reference's messages", async () => {
  const src = sources("bad", ["x"]);
  const dest = join(dir.path, "bad", "dest");
  const cases: Array<[unknown, number, string | RegExp]> = [
    ["{not json", 400, /^invalid request body: /],
    [{ source_paths: [], destination: dest }, 400, "source_paths must not be empty"],
    [{ destination: dest }, 400, "source_paths must not be empty"],
    [{ source_paths: src }, 400, "destination is required"],
    [{ source_paths: [src[0], src[0]], destination: src[0] }, 400, `source path "${src[0]}" cannot be the same as destination`],
    [{ source_paths: [dir.path], destination: dest }, 400, `source path is not a regular file: ${dir.path}`],
    [{ source_paths: src, destination: dest, username: "nobody-here" }, 401, /^error looking up user 'nobody-here'/],
    [{ source_paths: ["~root/x"], destination: dest }, 400, /^error resolving source path "~root\/x": /],
    [{ source_paths: src, destination: dest, padding: "p".repeat(2 * 1024 * 1024) }, 400, /^invalid request body: larger than/],
    [[1, 2], 400, "invalid request body: expected a JSON object"],
  ];
  for (const [body, status, message] of cases) {
    const r = await compose(body);
    assert.equal(r.status, status, JSON.stringify(body));
    const json = await r.json();
    assert.equal(json.code, status);
    if (typeof message === "string") assert.equal(json.message, message);
    else assert.match(json.message, message);
  }
  assert.equal(readFileSync(src[0], "utf8"), "x");
  assert.equal(existsSync(dest), false);
});

test("a missing source → 404 and nothing changes", async () => {
  const src = sources("missing", ["keep-1", "keep-2"]);
  const dest = join(dir.path, "missing", "dest");
  writeFileSync(dest, "old destination");
  own(dest);
  const ghost = join(dir.path, "missing", "ghost");
  const r = await compose({ source_paths: [src[0], ghost, src[1]], destination: dest });
  assert.equal(r.status, 404);
  assert.deepEqual(await r.json(), { code: 404, message: `source file not found: ${ghost}` });
  assert.equal(readFileSync(src[0], "utf8"), "keep-1");
  assert.equal(readFileSync(src[1], "utf8"), "keep-2");
  assert.equal(readFileSync(dest, "utf8"), "old destination");
  assert.deepEqual(readdirSync(join(dir.path, "missing")).sort(), ["dest", "part0", "part1"]);
});

test("ENOSPC while composing → 507, sources and destination untouched, no temp file", async () => {
  mount = mkdtempSync(join(tmpdir(), "envd-tmpfs-"));
  execFileSync("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", mount]);
  const src = sources("full", ["a".repeat(700_000), "b".repeat(700_000)]);
  const dest = join(mount, "dest");
  writeFileSync(dest, "old");
  own(dest);
  const r = await compose({ source_paths: src, destination: dest });
  assert.equal(r.status, 507);
  assert.deepEqual(await r.json(), { code: 507, message: "not enough disk space available" });
  assert.equal(readFileSync(dest, "utf8"), "old");
  assert.deepEqual(readdirSync(mount), ["dest"]);
  assert.equal(readFileSync(src[1], "utf8").length, 700_000);
});
