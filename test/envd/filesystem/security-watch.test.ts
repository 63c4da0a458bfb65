// Watching under attack: a user who makes a huge tree appear under a recursive watch must not
// stall the daemon, a flood that overflows one inotify queue must not fail unrelated watchers,
// and polling watchers nobody polls must not hold the watcher cap for good.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { EventType, type FilesystemEvent } from "../../../src/envd/gen/filesystem/filesystem_pb.js";
import { startDaemon } from "../helpers/daemon.js";
import { clients, tempDir } from "../helpers/clients.js";

const short = (evs: FilesystemEvent[]) => evs.map((e) => `${EventType[e.type]} ${e.name}`);

async function errorOf(p: Promise<unknown>): Promise<ConnectError> {
  const err = await p.then(
    () => assert.fail("expected an error"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ConnectError, String(err));
  return err;
}

/**
 * Polls `url`/health from a process of its own (this one is busy reading the watch stream, which
 * would inflate its own timings): mark() ends the baseline phase, stop() the measured one; each
 * phase reports its slowest answer in ms. The baseline is what this (shared, often loaded)
 * machine's scheduling alone costs an idle daemon.
 */
function healthProbe(url: string): { mark(): void; stop(): Promise<{ baseline: number; max: number; count: number }> } {
  const script = `
    const max = [0, 0], count = [0, 0];
    let phase = 0;
    process.stdin.on("data", (d) => (phase += d.length));
    (async () => {
      while (phase < 2) {
        const p = phase, t0 = performance.now();
        const r = await fetch(${JSON.stringify(url + "/health")});
        await r.arrayBuffer();
        max[p] = Math.max(max[p], performance.now() - t0);
        count[p]++;
        await new Promise((r) => setTimeout(r, 5));
      }
      process.stdout.write(JSON.stringify({ baseline: max[0], max: max[1], count: count[1] }));
      process.exit(0);
    })();`;
  const child = spawn(process.execPath, ["-e", script], { stdio: ["pipe", "pipe", "inherit"] });
  let out = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    mark: () => child.stdin!.write("m"),
    async stop() {
      child.stdin!.end("s");
      await exited;
      return JSON.parse(out) as { baseline: number; max: number; count: number };
    },
  };
}

/** A child process that builds `dirs` directories of `files` files each in `staging`. */
function buildTree(staging: string, dirs: number, files: number): Promise<void> {
  const script = `
    const fs = require("node:fs"), path = require("node:path");
    const [staging, dirs, files] = process.argv.slice(1);
    for (let d = 0; d < +dirs; d++) {
      const dir = path.join(staging, "d" + String(d).padStart(3, "0"), "inner");
      fs.mkdirSync(dir, { recursive: true });
      for (let f = 0; f < +files; f++) fs.closeSync(fs.openSync(path.join(dir, "f" + f), "w"));
    }`;
  const child = spawn(process.execPath, ["-e", script, staging, String(dirs), String(files)], { stdio: "inherit" });
  return new Promise((resolve, reject) => child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`tree builder exited ${code}`)))));
}

test("a tree of 30,000 entries appearing under a recursive watch: /health stays responsive, every entry is announced once, parents first", async (t0) => {
  const d = await startDaemon();
  const t = await tempDir("secwatch-tree");
  const DIRS = 100;
  const FILES = 300;
  try {
    const fs = clients(d.url).fs.binary;
    const watched = join(t.path, "watched");
    mkdirSync(watched);
    const ac = new AbortController();
    const stream = fs.watchDir({ path: watched, recursive: true }, { signal: ac.signal })[Symbol.asyncIterator]();
    assert.equal((await stream.next()).value?.event.case, "start");
    // Every directory and file of the tree, plus the tree's root itself.
    const expected = 1 + DIRS * 2 + DIRS * FILES;
    // Built outside the watch, then moved in at once: the daemon finds the whole tree in one event.
    await buildTree(join(t.path, "staging"), DIRS, FILES);
    const probe = healthProbe(d.url);
    await new Promise((r) => setTimeout(r, 1500));
    probe.mark();
    renameSync(join(t.path, "staging"), join(watched, "tree"));
    const seen = new Map<string, number>();
    const order: string[] = [];
    const deadline = setTimeout(() => ac.abort(), 120_000);
    try {
      while (seen.size < expected) {
        const r = await stream.next();
        if (r.done) break;
        if (r.value.event.case !== "filesystem") continue;
        const ev = r.value.event.value;
        if (ev.type !== EventType.CREATE) continue;
        seen.set(ev.name, (seen.get(ev.name) ?? 0) + 1);
        order.push(ev.name);
      }
    } finally {
      clearTimeout(deadline);
    }
    const { baseline, max, count } = await probe.stop();
    ac.abort();
    assert.equal(seen.size, expected, `${seen.size} of ${expected} entries announced`);
    const twice = [...seen].filter(([, n]) => n > 1);
    assert.deepEqual(twice, [], "no entry is announced twice");
    const at = new Map(order.map((name, i) => [name, i]));
    for (const name of order) {
      const slash = name.lastIndexOf("/");
      const parent = slash > 0 ? name.slice(0, slash) : undefined;
      if (parent) assert.ok(at.get(parent)! < at.get(name)!, `${name} came before its directory`);
    }
    assert.ok(count > 10, `only ${count} health checks ran`);
    // A walk in one turn held /health for seconds; sliced, it adds at most a slice to an answer.
    const allowed = 200 + baseline;
    t0.diagnostic(`/health: up to ${max.toFixed(0)} ms during the walk (${count} checks), ${baseline.toFixed(0)} ms idle`);
    assert.ok(max < allowed, `/health took up to ${max.toFixed(0)} ms while the tree was walked (${count} checks; idle: up to ${baseline.toFixed(0)} ms)`);
  } finally {
    t.cleanup();
    await d.stop();
  }
});

test("an inotify queue overflow fails only the watchers that may have lost events; the others keep going", async () => {
  const d = await startDaemon();
  const flooded = await tempDir("secwatch-flooded");
  const quiet = await tempDir("secwatch-quiet");
  try {
    const fs = clients(d.url).fs.binary;
    for (const f of ["a", "b"]) writeFileSync(join(flooded.path, f), "");
    const lossy = await fs.createWatcher({ path: flooded.path });
    const calm = await fs.createWatcher({ path: quiet.path });
    // The overflow is real: the daemon is stopped (it cannot read its queues) while more events
    // than a kernel queue holds (fs.inotify.max_queued_events) happen in the flooded directory.
    process.kill(d.pid, "SIGSTOP");
    try {
      const queue = Number(readFileSync("/proc/sys/fs/inotify/max_queued_events", "utf8"));
      // Alternating files and modes defeat the kernel's merging of identical events.
      for (let i = 0; i < queue + 4000; i++) chmodSync(join(flooded.path, i % 2 ? "a" : "b"), i % 3 ? 0o644 : 0o600);
      writeFileSync(join(quiet.path, "during"), "");
    } finally {
      process.kill(d.pid, "SIGCONT");
    }
    const lost = await errorOf(fs.getWatcherEvents({ watcherId: lossy.watcherId }));
    assert.equal(lost.code, Code.Internal);
    assert.match(lost.rawMessage, /^watcher error: .*overflow/);
    assert.deepEqual(short((await fs.getWatcherEvents({ watcherId: calm.watcherId })).events), ["CREATE during"]);
    writeFileSync(join(quiet.path, "after"), "");
    assert.deepEqual(short((await fs.getWatcherEvents({ watcherId: calm.watcherId })).events), ["CREATE after"]);
    assert.equal((await fetch(`${d.url}/health`)).status, 204);
  } finally {
    flooded.cleanup();
    quiet.cleanup();
    await d.stop();
  }
});

test("--watcher-idle-timeout: polling watchers nobody polls are removed and free the cap; polled ones stay", async () => {
  const d = await startDaemon({ args: ["--watcher-idle-timeout", "1", "--max-watchers", "3"] });
  const t = await tempDir("secwatch-idle");
  try {
    const fs = clients(d.url).fs.binary;
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await fs.createWatcher({ path: t.path })).watcherId);
    assert.equal((await errorOf(fs.createWatcher({ path: t.path }))).code, Code.ResourceExhausted, "the cap is full");
    const [polled, ...forgotten] = ids;
    // Polled more often than the timeout: it stays; the other two are never polled again.
    for (let i = 0; i < 10; i++) {
      await fs.getWatcherEvents({ watcherId: polled });
      await new Promise((r) => setTimeout(r, 300));
    }
    for (const watcherId of forgotten) {
      const gone = await errorOf(fs.getWatcherEvents({ watcherId }));
      assert.equal(gone.code, Code.NotFound);
      assert.match(gone.rawMessage, new RegExp(`watcher with id ${watcherId} not found`));
    }
    writeFileSync(join(t.path, "x"), "");
    assert.deepEqual(short((await fs.getWatcherEvents({ watcherId: polled })).events), ["CREATE x"]);
    // Their slots are free again.
    for (let i = 0; i < 2; i++) await fs.createWatcher({ path: t.path });
    assert.match(d.logs(), /polling watcher removed/);
  } finally {
    t.cleanup();
    await d.stop();
  }
});
