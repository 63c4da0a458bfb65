import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { sdkSandbox, tempDir } from "../helpers/clients.js";

type Sbx = Awaited<ReturnType<typeof sdkSandbox>>;
interface Ev {
  name: string;
  type: string;
  entry?: { path: string; type: string; size: number };
}

let d: Daemon;
let sbx: Sbx;
let dir: { path: string; cleanup(): void };

before(async () => {
  d = await startDaemon();
  sbx = await sdkSandbox(d.url);
  dir = await tempDir("watch-sdk");
});

after(async () => {
  dir.cleanup();
  await d.stop();
});

const e2b = () => import("e2b");

/** Waits until `pred` holds for the events collected so far. */
async function until(events: Ev[], pred: (evs: Ev[]) => boolean, what: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (pred(events)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`${what}; got ${JSON.stringify(events.map((e) => `${e.type} ${e.name}`))}`);
}

test("watchDir recursive: a directory created later is watched (CREATE sub, then WRITE sub/file)", async () => {
  const w = join(dir.path, "rec");
  await sbx.files.makeDir(w);
  const events: Ev[] = [];
  const handle = await sbx.files.watchDir(w, (e) => void events.push(e as unknown as Ev), { recursive: true });
  try {
    await sbx.files.makeDir(join(w, "sub"));
    await sbx.files.write(join(w, "sub", "file.txt"), "hello");
    await until(events, (evs) => evs.some((e) => e.type === "write" && e.name === "sub/file.txt"), "WRITE sub/file.txt");
    const create = events.findIndex((e) => e.type === "create" && e.name === "sub");
    const write = events.findIndex((e) => e.type === "write" && e.name === "sub/file.txt");
    assert.ok(create >= 0 && create < write, "CREATE sub before WRITE sub/file.txt");
    assert.ok(events.every((e) => e.entry === undefined), "no entries unless asked");
  } finally {
    await handle.stop();
  }
});

test("watchDir includeEntry: entries on create/write/chmod, none on remove/rename; rename is rename + create", async () => {
  const w = join(dir.path, "entries");
  await sbx.files.makeDir(w);
  const events: Ev[] = [];
  const handle = await sbx.files.watchDir(w, (e) => void events.push(e as unknown as Ev), { includeEntry: true });
  try {
    await sbx.files.write(join(w, "a.txt"), "abc");
    await sbx.files.rename(join(w, "a.txt"), join(w, "b.txt"));
    await sbx.files.remove(join(w, "b.txt"));
    await until(events, (evs) => evs.some((e) => e.type === "remove" && e.name === "b.txt"), "REMOVE b.txt");
    const write = events.find((e) => e.type === "write" && e.name === "a.txt");
    assert.ok(write?.entry, "write carries an entry");
    assert.equal(write.entry.path, join(w, "a.txt"));
    assert.equal(write.entry.type, "file");
    const rename = events.findIndex((e) => e.type === "rename" && e.name === "a.txt");
    const created = events.findIndex((e) => e.type === "create" && e.name === "b.txt");
    assert.ok(rename >= 0 && created === rename + 1, "RENAME a.txt then CREATE b.txt");
    assert.equal(events[rename].entry, undefined);
    assert.equal(events.find((e) => e.type === "remove")?.entry, undefined);
  } finally {
    await handle.stop();
  }
});

test("watchDir errors: a missing dir → FileNotFoundError; a file → SandboxError that is not AuthenticationError", async () => {
  const { FileNotFoundError, SandboxError, AuthenticationError, InvalidArgumentError } = await e2b();
  await assert.rejects(sbx.files.watchDir(join(dir.path, "missing"), () => undefined), FileNotFoundError);
  const file = join(dir.path, "plain.txt");
  writeFileSync(file, "");
  const err = await sbx.files.watchDir(file, () => undefined).then(
    () => assert.fail("watching a file must fail"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof SandboxError, String(err));
  assert.ok(!(err instanceof AuthenticationError));
  assert.ok(err instanceof InvalidArgumentError, String(err));
});

test("watchDir: stop() ends the watch, onExit runs once, and the daemon frees the watcher slot", async () => {
  const own = await startDaemon({ args: ["--max-watchers", "1"] });
  const t = await tempDir("watch-sdk-stop");
  try {
    const mine = await sdkSandbox(own.url);
    let exits = 0;
    const events: Ev[] = [];
    const handle = await mine.files.watchDir(t.path, (e) => void events.push(e as unknown as Ev), { onExit: () => void exits++ });
    const { RateLimitError } = await e2b();
    await assert.rejects(mine.files.watchDir(t.path, () => undefined), RateLimitError, "the one slot is taken");
    await handle.stop();
    writeFileSync(join(t.path, "late"), "");
    let again;
    for (let i = 0; i < 50 && !again; i++) {
      await new Promise((r) => setTimeout(r, 100));
      again = await mine.files.watchDir(t.path, () => undefined).catch(() => undefined);
    }
    assert.ok(again, "the slot came back after stop()");
    await again.stop();
    assert.deepEqual(events, [], "nothing delivered after stop()");
    assert.equal(exits, 1);
  } finally {
    t.cleanup();
    await own.stop();
  }
});
