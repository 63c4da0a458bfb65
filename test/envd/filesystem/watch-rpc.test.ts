import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { EventType, FileType, Filesystem, type FilesystemEvent, type WatchDirResponse } from "../../../src/envd/gen/filesystem/filesystem_pb.js";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { clients, tempDir, type Clients } from "../helpers/clients.js";

let d: Daemon;
let c: Clients;
let dir: { path: string; cleanup(): void };

before(async () => {
  d = await startDaemon();
  c = clients(d.url);
  dir = await tempDir("watch-rpc");
});

after(async () => {
  dir.cleanup();
  await d.stop();
});

const short = (evs: FilesystemEvent[]) => evs.map((e) => `${EventType[e.type]} ${e.name}`);

async function codeOf(p: Promise<unknown>): Promise<ConnectError> {
  const err = await p.then(
    () => assert.fail("expected an error"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ConnectError, String(err));
  return err;
}

/** A WatchDir stream with a deadline on every read. */
function openStream(client: Client<typeof Filesystem>, req: { path: string; recursive?: boolean; includeEntry?: boolean }, headers?: Record<string, string>) {
  const ac = new AbortController();
  const it = client.watchDir(req, { signal: ac.signal, headers })[Symbol.asyncIterator]();
  const next = async (ms = 10_000): Promise<IteratorResult<WatchDirResponse>> => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no message in ${ms} ms`)), ms)));
    try {
      return await Promise.race([it.next(), timeout]);
    } finally {
      clearTimeout(timer);
    }
  };
  return {
    next,
    /** Reads filesystem events (skipping keepalives) until `n` arrived. */
    async events(n: number): Promise<FilesystemEvent[]> {
      const out: FilesystemEvent[] = [];
      while (out.length < n) {
        const r = await next();
        if (r.done) break;
        if (r.value.event.case === "filesystem") out.push(r.value.event.value);
      }
      return out;
    },
    close: () => ac.abort(),
  };
}

for (const kind of ["json", "binary"] as const) {
  describe(`watching over Connect ${kind}`, () => {
    const fs = () => c.fs[kind];
    let n = 0;
    const fresh = () => {
      const p = join(dir.path, `${kind}-${n++}`);
      mkdirSync(p);
      return p;
    };

    test("polling watcher: events drained per call, rename = RENAME+CREATE, chmod = CHMOD, remove forgets the id", async () => {
      const w = fresh();
      const { watcherId } = await fs().createWatcher({ path: w });
      assert.match(watcherId, /^w[a-z0-9]{20}$/);
      assert.deepEqual((await fs().getWatcherEvents({ watcherId })).events, []);
      writeFileSync(join(w, "a.txt"), "1");
      chmodSync(join(w, "a.txt"), 0o600);
      renameSync(join(w, "a.txt"), join(w, "b.txt"));
      rmSync(join(w, "b.txt"));
      const { events } = await fs().getWatcherEvents({ watcherId });
      assert.deepEqual(short(events), ["CREATE a.txt", "WRITE a.txt", "CHMOD a.txt", "RENAME a.txt", "CREATE b.txt", "REMOVE b.txt"]);
      assert.ok(events.every((e) => e.entry === undefined), "no entries unless asked");
      assert.deepEqual((await fs().getWatcherEvents({ watcherId })).events, [], "drained");
      await fs().removeWatcher({ watcherId });
      const gone = await codeOf(fs().getWatcherEvents({ watcherId }));
      assert.equal(gone.code, Code.NotFound);
      assert.equal(gone.rawMessage, `watcher with id ${watcherId} not found`);
      assert.equal((await codeOf(fs().removeWatcher({ watcherId }))).code, Code.NotFound);
      assert.equal((await codeOf(fs().getWatcherEvents({ watcherId: "wnosuchwatcher0000000" }))).code, Code.NotFound);
    });

    test("polling watcher: includeEntry on CREATE/WRITE/CHMOD only, recursive picks up new dirs", async () => {
      const w = fresh();
      const { watcherId } = await fs().createWatcher({ path: w, recursive: true, includeEntry: true });
      mkdirSync(join(w, "sub"));
      // Seeing CREATE sub means the new directory is watched (as with inotify anywhere, what
      // happens inside it before that is only visible as what the directory then contains).
      const [sub] = (await fs().getWatcherEvents({ watcherId })).events;
      assert.deepEqual(short([sub]), ["CREATE sub"]);
      assert.equal(sub.entry?.type, FileType.DIRECTORY);
      assert.equal(sub.entry?.path, join(w, "sub"));
      writeFileSync(join(w, "sub", "f.txt"), "data");
      chmodSync(join(w, "sub", "f.txt"), 0o640);
      rmSync(join(w, "sub", "f.txt"));
      const { events } = await fs().getWatcherEvents({ watcherId });
      assert.deepEqual(short(events), ["CREATE sub/f.txt", "WRITE sub/f.txt", "CHMOD sub/f.txt", "REMOVE sub/f.txt"]);
      assert.equal(events[3].entry, undefined, "REMOVE never carries an entry");
      writeFileSync(join(w, "sub", "kept.txt"), "abc");
      const kept = (await fs().getWatcherEvents({ watcherId })).events;
      assert.deepEqual(short(kept), ["CREATE sub/kept.txt", "WRITE sub/kept.txt"]);
      assert.equal(kept[1].entry?.size, 3n);
      assert.equal(kept[1].entry?.type, FileType.FILE);
      await fs().removeWatcher({ watcherId });
    });

    test("CreateWatcher and WatchDir validate: missing → not_found, file → invalid_argument, NUL → invalid_argument", async () => {
      const w = fresh();
      writeFileSync(join(w, "file"), "");
      const missing = await codeOf(fs().createWatcher({ path: join(w, "missing") }));
      assert.equal(missing.code, Code.NotFound);
      assert.match(missing.rawMessage, /^path .*missing not found: /);
      const file = await codeOf(fs().createWatcher({ path: join(w, "file") }));
      assert.equal(file.code, Code.InvalidArgument);
      assert.equal(file.rawMessage, `path ${join(w, "file")} not a directory`);
      assert.equal((await codeOf(fs().createWatcher({ path: "a\0b" }))).code, Code.InvalidArgument);
      const s1 = openStream(fs(), { path: join(w, "missing") });
      assert.equal((await codeOf(s1.next())).code, Code.NotFound);
      const s2 = openStream(fs(), { path: join(w, "file") });
      assert.equal((await codeOf(s2.next())).code, Code.InvalidArgument);
    });

    test("WatchDir stream: start first, then rename as RENAME+CREATE, chmod, nested dirs in recursive mode", async () => {
      const w = fresh();
      const s = openStream(fs(), { path: w, recursive: true });
      const first = await s.next();
      assert.equal(first.value?.event.case, "start");
      writeFileSync(join(w, "x"), "1");
      renameSync(join(w, "x"), join(w, "y"));
      chmodSync(join(w, "y"), 0o700);
      chmodSync(w, 0o750);
      mkdirSync(join(w, "d1/d2"), { recursive: true });
      writeFileSync(join(w, "d1/d2/z"), "");
      const evs = await s.events(9);
      assert.deepEqual(short(evs), ["CREATE x", "WRITE x", "RENAME x", "CREATE y", "CHMOD y", "CHMOD .", "CREATE d1", "CREATE d1/d2", "CREATE d1/d2/z"]);
      s.close();
    });

    test("WatchDir stream: keepalives follow Keepalive-Ping-Interval when idle", async () => {
      const w = fresh();
      const s = openStream(fs(), { path: w }, { "keepalive-ping-interval": "1" });
      assert.equal((await s.next()).value?.event.case, "start");
      const t0 = Date.now();
      const r = await s.next(5000);
      assert.equal(r.value?.event.case, "keepalive");
      assert.ok(Date.now() - t0 >= 800, "not before the interval");
      writeFileSync(join(w, "after"), "");
      assert.deepEqual(short(await s.events(1)), ["CREATE after"]);
      s.close();
    });
  });
}

test("the watcher limit counts polling and streaming watchers (resource_exhausted), and frees slots", async () => {
  const small = await startDaemon({ args: ["--max-watchers", "2"] });
  const t = await tempDir("watch-limit");
  try {
    const fs = clients(small.url).fs.json;
    const { watcherId } = await fs.createWatcher({ path: t.path });
    const s = openStream(fs, { path: t.path });
    assert.equal((await s.next()).value?.event.case, "start");
    const over = await codeOf(fs.createWatcher({ path: t.path }));
    assert.equal(over.code, Code.ResourceExhausted);
    const overStream = openStream(fs, { path: t.path });
    assert.equal((await codeOf(overStream.next())).code, Code.ResourceExhausted);
    await fs.removeWatcher({ watcherId });
    const again = await fs.createWatcher({ path: t.path });
    assert.match(again.watcherId, /^w/);
    s.close();
    // The stream's slot is released when the client goes away.
    let freed = false;
    for (let i = 0; i < 50 && !freed; i++) {
      await new Promise((r) => setTimeout(r, 100));
      freed = await fs.createWatcher({ path: t.path }).then(
        () => true,
        () => false,
      );
    }
    assert.ok(freed, "slot of the closed stream came back");
  } finally {
    t.cleanup();
    assert.equal(await small.stop(), 0);
  }
});

test("a kernel queue overflow fails every watcher of the flooded directory loudly; new watchers work afterwards", async () => {
  const own = await startDaemon();
  const t = await tempDir("watch-overflow");
  try {
    const fs = clients(own.url).fs.binary;
    for (const f of ["a", "b"]) writeFileSync(join(t.path, f), "");
    const { watcherId } = await fs.createWatcher({ path: t.path });
    const s = openStream(fs, { path: t.path });
    assert.equal((await s.next()).value?.event.case, "start");
    process.kill(own.pid, "SIGSTOP");
    try {
      // Alternating files defeat the kernel's merging of identical events: more than the queue holds.
      const queue = Number(readFileSync("/proc/sys/fs/inotify/max_queued_events", "utf8"));
      for (let i = 0; i < queue + 4000; i++) chmodSync(join(t.path, i % 2 ? "a" : "b"), i % 3 ? 0o644 : 0o600);
    } finally {
      process.kill(own.pid, "SIGCONT");
    }
    const polled = await codeOf(fs.getWatcherEvents({ watcherId }));
    assert.equal(polled.code, Code.Internal);
    assert.match(polled.rawMessage, /^watcher error: .*overflow/);
    assert.equal((await codeOf(fs.getWatcherEvents({ watcherId }))).code, Code.Internal, "the error stays");
    const streamed = await codeOf(
      (async () => {
        for (;;) if ((await s.next()).done) return;
      })(),
    );
    assert.equal(streamed.code, Code.Internal);
    assert.match(streamed.rawMessage, /watcher error: .*overflow/);
    await fs.removeWatcher({ watcherId });

    const fresh = await fs.createWatcher({ path: t.path });
    writeFileSync(join(t.path, "c"), "");
    assert.deepEqual(short((await fs.getWatcherEvents({ watcherId: fresh.watcherId })).events), ["CREATE c"]);
  } finally {
    t.cleanup();
    await own.stop();
  }
});

test("stopping the daemon ends open watch streams and exits cleanly", async () => {
  const own = await startDaemon();
  const t = await tempDir("watch-stop");
  try {
    // h2c: an idle HTTP/1.1 keep-alive socket would hold the server's grace period on its own.
    const fs = clients(own.url).fs.binary;
    await fs.createWatcher({ path: t.path });
    const s = openStream(fs, { path: t.path, recursive: true });
    assert.equal((await s.next()).value?.event.case, "start");
    const t0 = Date.now();
    const reading = s.next(5000).then(
      (r) => assert.equal(r.done, true),
      (err: unknown) => assert.ok(err instanceof ConnectError, String(err)),
    );
    const code = await own.stop();
    assert.equal(code, 0);
    assert.ok(Date.now() - t0 < 3000, `prompt shutdown (${Date.now() - t0} ms)`);
    await reading;
  } finally {
    t.cleanup();
  }
});

const bindfs = (() => {
  try {
    execFileSync("bindfs", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

test("network filesystems (here FUSE via bindfs) are refused unless allowNetworkMounts", { skip: !bindfs && "bindfs is not installed" }, async () => {
  const t = await tempDir("watch-fuse");
  const src = join(t.path, "src");
  const mnt = join(t.path, "mnt");
  mkdirSync(src);
  mkdirSync(mnt);
  execFileSync("bindfs", [src, mnt]);
  try {
    for (const kind of ["json", "binary"] as const) {
      const refused = await codeOf(c.fs[kind].createWatcher({ path: mnt }));
      assert.equal(refused.code, Code.InvalidArgument);
      assert.equal(refused.rawMessage, `cannot watch path on network filesystem: ${mnt}`);
      const s = openStream(c.fs[kind], { path: mnt });
      assert.equal((await codeOf(s.next())).code, Code.InvalidArgument);
      const allowed = await c.fs[kind].createWatcher({ path: mnt, allowNetworkMounts: true });
      await c.fs[kind].removeWatcher({ watcherId: allowed.watcherId });
    }
  } finally {
    execFileSync("umount", [mnt]);
    t.cleanup();
  }
});
