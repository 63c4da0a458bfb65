import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, mkdirSync, writeFileSync, renameSync, chmodSync, unlinkSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { EventType, FileType, type FilesystemEvent } from "../../../src/envd/gen/filesystem/filesystem_pb.js";
import { InotifyHub } from "../../../src/envd/filesystem/hub.js";
import { DirWatch, eventTypes } from "../../../src/envd/filesystem/dir-watch.js";
import { loadInotify, parseEvents } from "../../../src/envd/filesystem/inotify.js";

const names = { userName: (u: number) => (u === 0 ? "root" : String(u)), groupName: (g: number) => (g === 0 ? "root" : String(g)) };
const T = EventType;
const short = (evs: FilesystemEvent[]) => evs.map((e) => `${T[e.type]} ${e.name}`);

describe("DirWatch over the inotify addon", () => {
  let dir: string;
  let hub: InotifyHub;
  before(() => {
    hub = new InotifyHub();
  });
  after(() => hub.close());

  const fresh = async (opts: { recursive?: boolean; includeEntry?: boolean; maxPending?: number } = {}) => {
    dir = mkdtempSync("/tmp/envd-dirwatch-");
    const w = new DirWatch(hub, {
      root: dir,
      recursive: opts.recursive ?? false,
      includeEntry: opts.includeEntry ?? false,
      names,
      maxPending: opts.maxPending ?? 1000,
    });
    await w.arm();
    return w;
  };
  const done = (w: DirWatch) => {
    w.close();
    rmSync(dir, { recursive: true, force: true });
  };
  const poll = (w: DirWatch) => {
    hub.flush();
    return w.drain();
  };

  test("create, write, chmod, rename, remove map to the reference's types", async () => {
    const w = await fresh();
    writeFileSync(join(dir, "a.txt"), "x");
    chmodSync(join(dir, "a.txt"), 0o600);
    renameSync(join(dir, "a.txt"), join(dir, "b.txt"));
    unlinkSync(join(dir, "b.txt"));
    assert.deepEqual(short(poll(w)), ["CREATE a.txt", "WRITE a.txt", "CHMOD a.txt", "RENAME a.txt", "CREATE b.txt", "REMOVE b.txt"]);
    assert.deepEqual(poll(w), [], "drained");
    done(w);
  });

  test("the watched dir itself is '.'", async () => {
    const w = await fresh();
    chmodSync(dir, 0o700);
    assert.deepEqual(short(poll(w)), ["CHMOD ."]);
    rmSync(dir, { recursive: true });
    assert.deepEqual(short(poll(w)), ["REMOVE ."]);
    done(w);
  });

  test("non-recursive watches do not see nested changes", async () => {
    mkdirSync((dir = mkdtempSync("/tmp/envd-dirwatch-")) + "/sub");
    const w = new DirWatch(hub, { root: dir, recursive: false, includeEntry: false, names, maxPending: 100 });
    await w.arm();
    writeFileSync(join(dir, "sub", "f"), "x");
    assert.deepEqual(short(poll(w)), []);
    done(w);
  });

  test("recursive: existing and new subdirectories, synthetic CREATE for contents, no duplicates", async () => {
    const w = await fresh({ recursive: true });
    mkdirSync(join(dir, "a/b/c"), { recursive: true });
    writeFileSync(join(dir, "a/b/c/f.txt"), "1");
    const first = short(poll(w));
    assert.deepEqual(first.slice(0, 3), ["CREATE a", "CREATE a/b", "CREATE a/b/c"]);
    assert.equal(new Set(first).size, first.length, `no duplicate events: ${first.join(", ")}`);
    assert.ok(first.includes("CREATE a/b/c/f.txt"), first.join(", "));
    writeFileSync(join(dir, "a/b/c/f.txt"), "2");
    assert.deepEqual(short(poll(w)), ["WRITE a/b/c/f.txt"]);
    done(w);
  });

  test("recursive: a renamed directory keeps reporting under its new name; moved-out trees go quiet", async () => {
    const w = await fresh({ recursive: true });
    mkdirSync(join(dir, "old/inner"), { recursive: true });
    poll(w);
    renameSync(join(dir, "old"), join(dir, "new"));
    assert.deepEqual(short(poll(w)), ["RENAME old", "CREATE new", "CREATE new/inner"]);
    writeFileSync(join(dir, "new/inner/x"), "1");
    assert.deepEqual(short(poll(w)), ["CREATE new/inner/x", "WRITE new/inner/x"]);
    const outside = mkdtempSync("/tmp/envd-dirwatch-out-");
    renameSync(join(dir, "new"), join(outside, "gone"));
    assert.deepEqual(short(poll(w)), ["RENAME new"]);
    writeFileSync(join(outside, "gone/inner/y"), "1");
    assert.deepEqual(poll(w), [], "no events from a tree moved out");
    rmSync(outside, { recursive: true });
    done(w);
  });

  test("includeEntry attaches entries to CREATE/WRITE/CHMOD only", async () => {
    const w = await fresh({ includeEntry: true });
    writeFileSync(join(dir, "f"), "abc");
    unlinkSync(join(dir, "f"));
    mkdirSync(join(dir, "d"));
    symlinkSync(join(dir, "d"), join(dir, "l"));
    const evs = poll(w);
    assert.deepEqual(short(evs), ["CREATE f", "WRITE f", "REMOVE f", "CREATE d", "CREATE l"]);
    assert.equal(evs[0].entry, undefined, "the file was gone when the event was handled: entry omitted");
    assert.equal(evs[2].entry, undefined);
    assert.equal(evs[3].entry?.type, FileType.DIRECTORY);
    assert.equal(evs[3].entry?.path, join(dir, "d"));
    assert.equal(evs[4].entry?.symlinkTarget, join(dir, "d"));
    done(w);
  });

  test("a bounded buffer overflows into a terminal error instead of dropping events", async () => {
    const w = await fresh({ maxPending: 5 });
    for (let i = 0; i < 10; i++) writeFileSync(join(dir, `f${i}`), "");
    hub.flush();
    assert.throws(() => w.drain(), /watcher error: event buffer overflow/);
    assert.throws(() => w.drain(), /watcher error/, "the error stays");
    done(w);
  });

  test("the stream yields buffered events then waits; closing ends it", async () => {
    const w = await fresh();
    const ac = new AbortController();
    const it = w.events(ac.signal);
    writeFileSync(join(dir, "s"), "");
    const first = await it.next();
    assert.equal(first.value?.name, "s");
    assert.equal(first.value?.type, T.CREATE);
    setTimeout(() => ac.abort(), 20);
    for (;;) {
      const r = await it.next();
      if (r.done) break;
    }
    done(w);
  });

  test("two watches on the same directory share the kernel watch independently", async () => {
    const w1 = await fresh();
    const w2 = new DirWatch(hub, { root: dir, recursive: false, includeEntry: false, names, maxPending: 100 });
    await w2.arm();
    writeFileSync(join(dir, "x"), "");
    hub.flush();
    assert.deepEqual(short(w1.drain()), ["CREATE x"]);
    assert.deepEqual(short(w2.drain()), ["CREATE x"]);
    w2.close();
    writeFileSync(join(dir, "y"), "");
    assert.deepEqual(short(poll(w1)), ["CREATE y"], "w1 still armed after w2 left");
    done(w1);
  });

  test("eventTypes keeps the fixed order and parseEvents reads kernel records", () => {
    const c = loadInotify().constants;
    assert.deepEqual(eventTypes(c.IN_CREATE | c.IN_MOVED_FROM | c.IN_ATTRIB | c.IN_MODIFY | c.IN_DELETE, c), [
      T.CREATE,
      T.RENAME,
      T.CHMOD,
      T.WRITE,
      T.REMOVE,
    ]);
    const rec = Buffer.alloc(32);
    rec.writeInt32LE(7, 0);
    rec.writeUInt32LE(c.IN_CREATE, 4);
    rec.writeUInt32LE(0, 8);
    rec.writeUInt32LE(16, 12);
    rec.write("name.txt", 16);
    assert.deepEqual(parseEvents(rec), [{ wd: 7, mask: c.IN_CREATE, cookie: 0, name: "name.txt" }]);
  });
});
