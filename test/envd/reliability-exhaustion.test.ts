// Exhaustion: a full disk and exhausted inodes on a small tmpfs (507, earlier content intact,
// no partial or temp files), the configurable limits --max-processes, --max-watchers and
// --max-message-bytes (resource_exhausted on every transport, slots freed again), the
// kernel's inotify watch limit (lowered inside a private user namespace only) and the
// pending-stdin bound.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { startDaemon, ENVD_BIN, type Daemon } from "./helpers/daemon.js";
import { basicAuth, clients, sdkSandbox } from "./helpers/clients.js";
import { assertHealthy, sleep } from "./helpers/fuzz.js";
import { Signal } from "../../src/envd/gen/process/process_pb.js";

const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");
const MiB = 1024 * 1024;
const mounts: string[] = [];

after(() => {
  for (const m of mounts) {
    spawnSync("umount", [m]);
    spawnSync("umount", ["-l", m]);
    rmSync(m, { recursive: true, force: true });
  }
});

/** Mounts a fresh tmpfs of the given size and inode count; unmounted after the file. */
function smallDisk(options: string): string {
  const dir = mkdtempSync(join(tmpdir(), "envd-full-"));
  execFileSync("mount", ["-t", "tmpfs", "-o", options, "tmpfs", dir]);
  mounts.push(dir);
  return dir;
}

async function put(d: Daemon, path: string, body: Uint8Array | string, headers: Record<string, string> = {}): Promise<{ status: number; json: { message?: string } }> {
  const r = await fetch(`${d.url}/files?path=${encodeURIComponent(path)}`, {
    method: "POST",
    headers: { "content-type": "application/octet-stream", ...headers },
    body: body as BodyInit,
  });
  const text = await r.text();
  let json: { message?: string } = {};
  try {
    json = JSON.parse(text) as { message?: string };
  } catch {
    json = { message: text };
  }
  return { status: r.status, json };
}

const strays = (dir: string) => readdirSync(dir).filter((n) => n.includes(".envd-upload.") || n.includes(".e2b-compose."));

test("full disk: 507 for new files and overwrites, earlier content intact, nothing partial left", async () => {
  const disk = smallDisk("size=4m,mode=0777");
  const d = await startDaemon();
  try {
    const a = randomBytes(1.5 * MiB);
    const c = randomBytes(1.5 * MiB);
    assert.equal((await put(d, join(disk, "a.bin"), a)).status, 200);
    assert.equal((await put(d, join(disk, "c.bin"), c)).status, 200);
    // A new file that does not fit: 507 and no partial file.
    const big = await put(d, join(disk, "big.bin"), randomBytes(2 * MiB));
    assert.equal(big.status, 507, JSON.stringify(big.json));
    assert.match(big.json.message ?? "", /attempted to write \d+ bytes: not enough disk space available/);
    assert.equal(existsSync(join(disk, "big.bin")), false, "no partial new file");
    // Overwriting an existing file with more than fits: 507, the old content stays whole.
    const over = await put(d, join(disk, "a.bin"), randomBytes(3 * MiB));
    assert.equal(over.status, 507);
    assert.equal(sha(readFileSync(join(disk, "a.bin"))), sha(a), "the old content is intact");
    // Chunked (no Content-Length) and gzip-expanding bodies fail the same way.
    const gz = (await import("node:zlib")).gzipSync(Buffer.alloc(3 * MiB));
    const g = await put(d, join(disk, "gz.bin"), gz, { "content-encoding": "gzip" });
    assert.equal(g.status, 507);
    assert.equal(existsSync(join(disk, "gz.bin")), false);
    // Compose that cannot fit: 507, sources and destination untouched.
    const comp = await fetch(`${d.url}/files/compose`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ source_paths: [join(disk, "a.bin"), join(disk, "c.bin")], destination: join(disk, "ac.bin") }),
    });
    assert.equal(comp.status, 507, await comp.text());
    assert.equal(sha(readFileSync(join(disk, "a.bin"))), sha(a));
    assert.equal(sha(readFileSync(join(disk, "c.bin"))), sha(c));
    assert.equal(existsSync(join(disk, "ac.bin")), false);
    assert.deepEqual(strays(disk), [], "no temp files left behind");
    // The SDK maps 507 to NotEnoughSpaceError.
    const sbx = await sdkSandbox(d.url);
    const { NotEnoughSpaceError } = await import("e2b");
    await assert.rejects(sbx.files.write(join(disk, "sdk.bin"), new Blob([randomBytes(2 * MiB)])), (e: unknown) => e instanceof NotEnoughSpaceError);
    // Space is usable again once freed.
    rmSync(join(disk, "c.bin"));
    assert.equal((await put(d, join(disk, "after.bin"), randomBytes(MiB))).status, 200);
    await assertHealthy(d, "full disk");
  } finally {
    await d.stop();
  }
});

test("no inodes left: 507 'not enough inodes' for uploads, resource_exhausted for MakeDir", async () => {
  const disk = smallDisk("size=8m,nr_inodes=12,mode=0777");
  const d = await startDaemon();
  try {
    let i = 0;
    let last = { status: 200, json: {} as { message?: string } };
    while (last.status === 200 && i < 40) last = await put(d, join(disk, `f${i++}`), "x");
    assert.equal(last.status, 507, JSON.stringify(last.json));
    assert.match(last.json.message ?? "", /not enough inodes available/);
    const c = clients(d.url);
    await assert.rejects(c.fs.json.makeDir({ path: join(disk, "dir", "sub") }, { headers: basicAuth("root") }), (e: unknown) => e instanceof ConnectError && e.code === Code.ResourceExhausted);
    // Overwriting an existing file still works when no inode is left for a temp file.
    assert.equal((await put(d, join(disk, "f0"), "replaced")).status, 200);
    assert.equal(readFileSync(join(disk, "f0"), "utf8"), "replaced");
    assert.deepEqual(strays(disk), []);
    await assertHealthy(d, "no inodes");
  } finally {
    await d.stop();
  }
});

const exhausted = (e: unknown) => e instanceof ConnectError && e.code === Code.ResourceExhausted;

test("--max-processes: Start beyond the limit is resource_exhausted (also in a concurrent burst); a slot frees when one ends", async () => {
  const d = await startDaemon({ args: ["--max-processes", "3"] });
  const c = clients(d.url);
  const start = async (kind: "json" | "binary", args: string[]) => {
    const it = c.proc[kind].start({ process: { cmd: "/bin/sleep", args }, stdin: false })[Symbol.asyncIterator]();
    const first = await it.next();
    void it.return?.();
    return (first.value?.event?.event.value as { pid: number }).pid;
  };
  try {
    const pids = [await start("json", ["30"]), await start("binary", ["30"]), await start("json", ["30"])];
    await assert.rejects(start("json", ["30"]), exhausted, "a fourth process is refused");
    await assert.rejects(start("binary", ["30"]), exhausted, "over h2c too");
    await c.proc.json.sendSignal({ process: { selector: { case: "pid", value: pids[0] } }, signal: Signal.SIGKILL });
    let again = 0;
    for (let i = 0; i < 40 && !again; i++) {
      again = await start("json", ["30"]).catch(() => 0);
      if (!again) await sleep(50);
    }
    assert.ok(again > 0, "a slot frees once a process ended");
    for (const p of (await c.proc.json.list({})).processes) {
      await c.proc.json.sendSignal({ process: { selector: { case: "pid", value: p.pid } }, signal: Signal.SIGKILL });
    }
    await sleep(300);
    // A concurrent burst over one h2c session: never more than the limit alive.
    const burst = await Promise.allSettled(Array.from({ length: 12 }, () => start("binary", ["5"])));
    const ok = burst.filter((r) => r.status === "fulfilled").length;
    assert.ok(burst.every((r) => r.status === "fulfilled" || exhausted(r.reason)), "refusals are resource_exhausted");
    assert.ok(ok <= 3, `${ok} processes started concurrently with --max-processes 3`);
    assert.ok((await c.proc.json.list({})).processes.length <= 3);
    for (const p of (await c.proc.json.list({})).processes) {
      await c.proc.json.sendSignal({ process: { selector: { case: "pid", value: p.pid } }, signal: Signal.SIGKILL });
    }
    await assertHealthy(d, "--max-processes");
  } finally {
    await d.stop();
  }
});

test("--max-watchers: WatchDir and CreateWatcher beyond the limit are resource_exhausted; closing frees slots", async () => {
  const dir = mkdtempSync(join(tmpdir(), "envd-watchlimit-"));
  const d = await startDaemon({ args: ["--max-watchers", "3"] });
  const c = clients(d.url);
  const acs: AbortController[] = [];
  const openStream = async (kind: "json" | "binary" | "grpc") => {
    const ac = new AbortController();
    const it = c.fs[kind].watchDir({ path: dir }, { signal: ac.signal })[Symbol.asyncIterator]();
    await it.next(); // start event: the watch is armed
    acs.push(ac);
    return ac;
  };
  try {
    await openStream("json");
    await openStream("binary");
    const id = (await c.fs.json.createWatcher({ path: dir })).watcherId;
    await assert.rejects(c.fs.json.createWatcher({ path: dir }), exhausted);
    await assert.rejects(openStream("grpc"), exhausted);
    await assert.rejects(openStream("json"), exhausted);
    await c.fs.json.removeWatcher({ watcherId: id });
    const id2 = (await c.fs.binary.createWatcher({ path: dir })).watcherId;
    assert.ok(id2, "RemoveWatcher freed a slot");
    acs[0].abort(); // a client going away frees its stream's slot
    let reopened = false;
    for (let i = 0; i < 40 && !reopened; i++) {
      reopened = await openStream("grpc").then(() => true, () => false);
      if (!reopened) await sleep(50);
    }
    assert.ok(reopened, "an aborted WatchDir frees its slot");
    for (const ac of acs) ac.abort();
    await c.fs.json.removeWatcher({ watcherId: id2 });
    await assertHealthy(d, "--max-watchers");
  } finally {
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("--max-message-bytes: larger Connect messages are resource_exhausted on every transport and RPC kind", async () => {
  const d = await startDaemon({ args: ["--max-message-bytes", String(64 * 1024)] });
  const c = clients(d.url);
  try {
    const big = "x".repeat(70 * 1024);
    for (const kind of ["json", "binary", "grpc", "grpcWeb"] as const) {
      await assert.rejects(c.fs[kind].stat({ path: big }), exhausted, `unary ${kind}`);
      await assert.rejects(
        (async () => {
          for await (const _ of c.proc[kind].start({ process: { cmd: "/bin/echo", args: [big] } })) void _;
        })(),
        exhausted,
        `server stream ${kind}`,
      );
      // Just under the limit is decoded and judged on its content (here: too long a path).
      await assert.rejects(c.fs[kind].stat({ path: "y".repeat(60 * 1024) }), (e: unknown) => e instanceof ConnectError && e.code === Code.InvalidArgument, `under the limit ${kind}`);
    }
    // Client streaming over h2c: an oversize message in the middle of a StreamInput.
    const it = c.proc.binary.start({ process: { cmd: "/bin/cat" }, stdin: true })[Symbol.asyncIterator]();
    const pid = ((await it.next()).value!.event!.event.value as { pid: number }).pid;
    void it.return?.();
    async function* input() {
      const process = { selector: { case: "pid" as const, value: pid } };
      yield { event: { case: "start" as const, value: { process } } };
      yield { event: { case: "data" as const, value: { input: { input: { case: "stdin" as const, value: Buffer.from("small\n") } } } } };
      await sleep(100);
      yield { event: { case: "data" as const, value: { input: { input: { case: "stdin" as const, value: Buffer.alloc(70 * 1024) } } } } };
    }
    await assert.rejects(c.proc.binary.streamInput(input()), exhausted, "client stream");
    await c.proc.json.sendSignal({ process: { selector: { case: "pid", value: pid } }, signal: Signal.SIGKILL });
    await assertHealthy(d, "--max-message-bytes");
  } finally {
    await d.stop();
  }
});

test("pending stdin is bounded: input piling up for a process that never reads it is resource_exhausted", async () => {
  const d = await startDaemon();
  const c = clients(d.url);
  try {
    const it = c.proc.binary.start({ process: { cmd: "/bin/sleep", args: ["30"] }, stdin: true })[Symbol.asyncIterator]();
    const pid = ((await it.next()).value!.event!.event.value as { pid: number }).pid;
    void it.return?.();
    const sel = { selector: { case: "pid" as const, value: pid } };
    // SendInput returns once the process took the bytes; concurrent calls pile up beside it.
    // Five times 16 MiB is more than the 64 MiB that may wait: one of them is refused at once.
    const chunk = Buffer.alloc(16 * MiB, 0x61);
    const calls = Array.from({ length: 5 }, () => c.proc.binary.sendInput({ process: sel, input: { input: { case: "stdin", value: chunk } } }));
    const first = await Promise.race([...calls.map((p) => p.then(() => "written", (e: unknown) => e)), sleep(15_000).then(() => "nothing refused in 15 s")]);
    assert.ok(exhausted(first), `the first call to finish: ${String(first)}`);
    assert.ok((await c.proc.json.list({})).processes.some((p) => p.pid === pid), "the process itself is unaffected");
    await c.proc.json.sendSignal({ process: sel, signal: Signal.SIGKILL });
    const settled = await Promise.allSettled(calls);
    assert.ok(settled.every((r) => r.status === "rejected"), "the waiting calls fail once the process is gone");
    await assertHealthy(d, "pending stdin");
  } finally {
    await d.stop();
  }
});

/** Starts the daemon inside a private user namespace whose inotify watch limit is `limit`. */
async function daemonWithWatchLimit(limit: number, scratch: string): Promise<{ url: string; stop(): void; logs(): string }> {
  const args = ["--port", "0", "--default-user", "root", "--clock", "off", "--run-dir", join(scratch, "run"), "--hosts-file", join(scratch, "hosts"), "--ca-bundle", join(scratch, "ca"), "--ca-cert", join(scratch, "cert")];
  const p = spawn("unshare", ["--user", "--map-root-user", "sh", "-c", `echo ${limit} > /proc/sys/user/max_inotify_watches && exec "$0" "$@"`, ENVD_BIN, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  p.stdout.on("data", (b: Buffer) => (out += b));
  p.stderr.on("data", (b: Buffer) => (out += b));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line:\n${out}`)), 15_000);
    p.stdout.on("data", () => {
      const m = /"port":(\d+)[^\n]*"msg":"listening"/.exec(out);
      if (m) (clearTimeout(timer), resolve(Number(m[1])));
    });
    p.on("exit", () => reject(new Error(`exited:\n${out}`)));
  });
  return { url: `http://127.0.0.1:${port}`, stop: () => p.kill("SIGKILL"), logs: () => out };
}

const userns = spawnSync("unshare", ["--user", "--map-root-user", "sh", "-c", "echo 40 > /proc/sys/user/max_inotify_watches"]).status === 0;

test("the kernel's inotify watch limit (lowered in a private user namespace) gives resource_exhausted, not a crash", { skip: !userns && "user namespaces are unavailable here" }, async () => {
  const scratch = mkdtempSync(join(tmpdir(), "envd-inotify-"));
  const tree = join(scratch, "tree");
  for (let i = 0; i < 60; i++) mkdirSync(join(tree, `d${i}`), { recursive: true });
  const d = await daemonWithWatchLimit(40, scratch);
  try {
    const c = clients(d.url);
    const first = async (req: { path: string; recursive: boolean }) => {
      const it = c.fs.json.watchDir(req)[Symbol.asyncIterator]();
      const r = await it.next();
      void it.return?.();
      return r.value;
    };
    await assert.rejects(first({ path: tree, recursive: true }), (e: unknown) => exhausted(e) && /inotify watch limit reached/.test((e as Error).message));
    await assert.rejects(c.fs.json.createWatcher({ path: tree, recursive: true }), exhausted);
    // The failed attempts released what they had added: a small watch still works.
    const ok = await first({ path: join(tree, "d1"), recursive: false });
    assert.equal(ok?.event.case, "start");
    const health = await fetch(`${d.url}/health`);
    assert.equal(health.status, 204);
    assert.doesNotMatch(d.logs(), /unhandled rejection|uncaught/i);
  } finally {
    d.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
});

