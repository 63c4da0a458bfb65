// Disconnect storms: Start, Connect, WatchDir, download and upload requests (HTTP/1.1 and
// h2c) aborted at seeded random points. Afterwards the daemon's descriptors and RSS are back
// near their baseline, a long-running process it started is unaffected, every upload target
// holds either its old content or the complete content of one upload (never a torn file),
// and no upload temp file is left. Quick: hundreds of aborts; ENVD_SOAK=1: thousands. The abort
// points are the fuzz input; what is checked waits for events (processes' end events, the daemon
// letting go of closed connections and of uploaded files), never for a stretch of time.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { createHash, randomBytes } from "node:crypto";
import { chownSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { startDaemon, type Daemon } from "./helpers/daemon.js";
import { clients } from "./helpers/clients.js";
import { assertHealthy, budget, envelope, pool, procStats, Rng, seeds, settleFds, SOAK } from "./helpers/fuzz.js";
import { closedSocketsHeld, until } from "./helpers/at-rest.js";
import { Signal } from "../../src/envd/gen/process/process_pb.js";

let d: Daemon;
let scratch: string;
let victimPid = 0;
/** One set of h2c clients for the whole file: its session is part of the descriptor baseline. */
let h2: ReturnType<typeof clients>;
const TARGETS = 12;
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");
/** Per target: hashes of every content that may legitimately be there afterwards. */
const allowed = new Map<string, Set<string>>();
/** Per target: whether some upload to it was answered 200 (so it must exist afterwards). */
const committed = new Map<string, boolean>();
const outcome = new Map<string, number>();
const count = (k: string) => outcome.set(k, (outcome.get(k) ?? 0) + 1);

before(async () => {
  scratch = join("/tmp", `envd-storm-${process.pid}`);
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(join(scratch, "watched"), { recursive: true });
  chownSync(scratch, 1001, 1001);
  writeFileSync(join(scratch, "big.bin"), randomBytes(4 << 20));
  for (let i = 0; i < TARGETS; i++) {
    const path = join(scratch, `target-${i}.bin`);
    const set = new Set<string>();
    if (i % 2 === 0) {
      const initial = Buffer.from(`initial content of target ${i}\n`);
      writeFileSync(path, initial);
      chownSync(path, 1001, 1001); // the user's own file: uploads act as that user
      set.add(sha(initial));
    } else set.add("absent");
    allowed.set(path, set);
  }
  d = await startDaemon({ args: ["--default-workdir", scratch] });
  h2 = clients(d.url);
  // The victim: a process that must live through every storm, printing a counter.
  const c = clients(d.url);
  const ac = new AbortController();
  const stream = c.proc.json.start(
    { process: { cmd: "/bin/sh", args: ["-c", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.05; done"] }, tag: "storm-victim" },
    { signal: ac.signal },
  );
  for await (const r of stream) {
    if (r.event?.event.case === "start") {
      victimPid = r.event.event.value.pid;
      break;
    }
  }
  ac.abort();
});

after(async () => {
  if (victimPid) {
    await clients(d.url).proc.json.sendSignal({ process: { selector: { case: "pid", value: victimPid } }, signal: Signal.SIGKILL }).catch(() => undefined);
  }
  await d?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

/** Sends a request on its own connection and destroys it `abortMs` after sending, or after `readBytes` of response. */
function aborted(path: string, headers: Record<string, string>, body: Buffer | undefined, abortMs: number, readBytes = Infinity): Promise<void> {
  return new Promise((resolve) => {
    const req = httpRequest(`${d.url}${path}`, { method: body ? "POST" : "GET", headers, agent: false });
    let got = 0;
    const timer = setTimeout(() => req.destroy(), abortMs);
    req.on("response", (res) => {
      res.on("data", (c: Buffer) => {
        got += c.length;
        if (got >= readBytes) req.destroy();
      });
      res.on("end", () => (clearTimeout(timer), count("ran to the end")));
      res.on("error", () => undefined);
    });
    req.on("error", () => undefined);
    req.on("close", () => (clearTimeout(timer), resolve()));
    req.end(body);
  });
}

/**
 * Uploads `content` to `path`; with `cutAt`, sends that many body bytes, waits for `hold` (a
 * promise; by default the bytes' flush to the socket) and destroys the connection.
 */
function upload(path: string, content: Buffer, cutAt: number | undefined, hold?: Promise<unknown>): Promise<number> {
  return new Promise((resolve) => {
    const req = httpRequest(`${d.url}/files?path=${encodeURIComponent(path)}`, {
      method: "POST",
      headers: { "content-type": "application/octet-stream", "content-length": String(content.length) },
      agent: false,
    });
    let status = 0;
    req.on("response", (res) => {
      status = res.statusCode ?? 0;
      res.resume();
    });
    req.on("error", () => undefined);
    req.on("close", () => resolve(status));
    (async () => {
      const chunk = 16 * 1024;
      for (let off = 0; off < content.length; off += chunk) {
        if (req.destroyed) return;
        const end = Math.min(content.length, off + chunk);
        if (cutAt !== undefined && cutAt < end) {
          await new Promise<void>((r) => req.write(content.subarray(off, cutAt), () => r()));
          await hold;
          req.destroy();
          return;
        }
        if (!req.write(content.subarray(off, end))) await new Promise((r) => req.once("drain", r));
      }
      req.end();
    })().catch(() => req.destroy());
  });
}

type Op = (rng: Rng) => Promise<void>;

const ops: Record<string, Op> = {
  async startH1(rng) {
    const body = envelope(0, JSON.stringify({ process: { cmd: "/bin/sh", args: ["-c", "echo storm; sleep 0.2"] } }));
    await aborted("/process.Process/Start", { "content-type": "application/connect+json" }, body, rng.int(60));
  },
  async connectH1(rng) {
    const body = envelope(0, JSON.stringify({ process: { tag: "storm-victim" } }));
    await aborted("/process.Process/Connect", { "content-type": "application/connect+json" }, body, rng.int(150), rng.chance(0.5) ? 1 + rng.int(200) : Infinity);
  },
  async watchH1(rng) {
    const body = envelope(0, JSON.stringify({ path: join(scratch, "watched"), recursive: rng.chance(0.5) }));
    await aborted("/filesystem.Filesystem/WatchDir", { "content-type": "application/connect+json" }, body, rng.int(80));
  },
  async download(rng) {
    await aborted(`/files?path=${encodeURIComponent(join(scratch, "big.bin"))}`, rng.chance(0.3) ? { "accept-encoding": "gzip" } : {}, undefined, 5 + rng.int(300), rng.int(4 << 20));
  },
  async upload(rng) {
    const path = join(scratch, `target-${rng.int(TARGETS)}.bin`);
    const content = randomBytes(rng.chance(0.2) ? rng.int(3 << 20) : rng.int(64 << 10));
    const cut = rng.chance(0.7) ? rng.int(content.length + 1) : undefined;
    // A request that sent its whole body may still commit even if the answer is lost.
    if (cut === undefined || cut >= content.length) allowed.get(path)!.add(sha(content));
    const status = await upload(path, content, cut);
    if (status === 200) committed.set(path, true);
    count(`upload ${cut === undefined || cut >= content.length ? "whole" : "cut"} → ${status || "no answer"}`);
    if (cut !== undefined && cut < content.length) assert.notEqual(status, 200, "an upload cut short must not succeed");
  },
  async startH2(rng) {
    const c = h2;
    const ac = new AbortController();
    setTimeout(() => ac.abort(), rng.int(60));
    try {
      for await (const _ of c.proc.binary.start({ process: { cmd: "/bin/sh", args: ["-c", "echo h2; sleep 0.2"] } }, { signal: ac.signal })) void _;
    } catch {
      // aborted on purpose
    }
  },
  async watchH2(rng) {
    const c = h2;
    const ac = new AbortController();
    setTimeout(() => ac.abort(), rng.int(80));
    try {
      for await (const _ of c.fs.grpc.watchDir({ path: join(scratch, "watched"), recursive: true }, { signal: ac.signal })) void _;
    } catch {
      // aborted on purpose
    }
  },
};

async function storm(n: number, seed: number): Promise<void> {
  const names = Object.keys(ops);
  const rng = new Rng(seed);
  const plan = Array.from({ length: n }, () => ({ op: rng.pick(names), seed: rng.int(2 ** 31) }));
  // Something for the watchers to report while they are torn down.
  const churn = setInterval(() => writeFileSync(join(scratch, "watched", `f${Date.now() % 7}`), "x"), 20);
  try {
    await pool(plan, 24, async ({ op, seed: s }) => ops[op](new Rng(s)));
  } finally {
    clearInterval(churn);
  }
}

/** Connects to the victim and reads its output until it has printed `n` more ticks (or its stream ends); returns the count. */
async function victimTicks(n: number): Promise<number> {
  const c = clients(d.url);
  const ac = new AbortController();
  let ticks = 0;
  try {
    for await (const r of c.proc.json.connect({ process: { selector: { case: "pid", value: victimPid } } }, { signal: ac.signal })) {
      if (r.event?.event.case === "data") ticks += (Buffer.from(r.event.event.value.output.value as Uint8Array).toString().match(/tick/g) ?? []).length;
      if (r.event?.event.case === "end" || ticks >= n) break;
    }
  } finally {
    ac.abort();
  }
  return ticks;
}

/** Waits for the end event of every process but the victim (each storm process ends by itself). */
async function othersEnded(): Promise<void> {
  const c = clients(d.url);
  for (;;) {
    const others = (await c.proc.json.list({})).processes.map((p) => p.pid).filter((pid) => pid !== victimPid);
    if (others.length === 0) return;
    await Promise.all(others.map(async (pid) => {
      try {
        for await (const r of c.proc.json.connect({ process: { selector: { case: "pid", value: pid } } })) if (r.event?.event.case === "end") break;
      } catch {
        // ended (and was forgotten) between the list and the connect
      }
    }));
  }
}

/** The daemon is at rest: no process but the victim, and every connection a client closed is closed on its side too. */
async function atRest(): Promise<void> {
  await othersEnded();
  await until(() => closedSocketsHeld(d.pid).length === 0, "the daemon still holds connections its clients closed");
}

/** Waits until the daemon holds no descriptor on `path` nor on an upload temp file beside it: every upload to it has settled. */
async function uploadsSettled(path: string): Promise<void> {
  const temp = `.${basename(path)}.envd-upload.`;
  await until(() => !procStats(d.pid).fdTargets.some((t) => t.startsWith(path) || t.includes(temp)), `uploads to ${path} still open in the daemon`);
}

test("disconnect storm: descriptors and memory return, the victim process runs on, no torn or temp files", async (t) => {
  const list = seeds(budget(2, 12));
  const perRound = budget(300, 1500);
  // Warm-up round: lazy module loading and V8 heap growth are not leaks.
  await storm(budget(100, 400), list[0]);
  await atRest();
  const base = procStats(d.pid);
  t.diagnostic(`baseline after warm-up: ${base.fds} fds, ${Math.round(base.rssKiB / 1024)} MiB RSS`);
  const rss: number[] = [];
  for (const seed of list) {
    await storm(perRound, seed);
    await assertHealthy(d, `after storm ${seed}`);
    const fds = await settleFds(d.pid, base.fds + 2, 20_000);
    assert.ok(fds <= base.fds + 2, `seed ${seed}: ${fds} descriptors open, baseline ${base.fds}:\n${procStats(d.pid).fdTargets.join("\n")}`);
    rss.push(procStats(d.pid).rssKiB);
  }
  const rssMiB = rss.map((k) => Math.round(k / 1024));
  t.diagnostic(`RSS after each round (MiB): ${rssMiB.join(", ")}; outcomes ${JSON.stringify(Object.fromEntries(outcome))}`);
  // Tolerance: within 96 MiB of the warmed-up baseline, and (soak) no growth across later rounds.
  assert.ok(rss.at(-1)! <= base.rssKiB + 96 * 1024, `RSS ${rssMiB.at(-1)} MiB vs baseline ${Math.round(base.rssKiB / 1024)} MiB`);
  if (SOAK && rss.length >= 4) assert.ok(rss.at(-1)! <= rss[1] + 48 * 1024, `RSS keeps growing across rounds: ${rssMiB.join(", ")}`);

  // Processes: the victim is alive and still producing output; every storm process has ended.
  const c = clients(d.url);
  await othersEnded();
  assert.deepEqual((await c.proc.json.list({})).processes.map((p) => p.pid), [victimPid], "only the victim is still running");
  assert.ok((await victimTicks(5)) >= 5, "the victim keeps printing");

  // Files: every target is its old content or exactly one upload's complete content.
  const names = readdirSync(scratch);
  assert.deepEqual(names.filter((n) => n.includes(".envd-upload.")), [], "no upload temp file remains");
  for (const [path, ok] of allowed) {
    const now = existsSync(path) ? sha(readFileSync(path)) : "absent";
    assert.ok(ok.has(now), `${path}: content is neither its old content nor any complete upload (torn)`);
    if (committed.get(path)) assert.notEqual(now, "absent", `${path}: an upload was answered 200 but the file is gone`);
  }
});

test("racing uploads to one new path: a failed upload never removes the file another one committed", async () => {
  const rounds = budget(30, 300);
  const lost: string[] = [];
  await pool(Array.from({ length: rounds }, (_, i) => i), 6, async (round) => {
    const rng = new Rng(round * 31 + 7);
    const path = join(scratch, "race", `new-${round}.bin`);
    const whole = new Set<string>();
    // The first upload creates the file, sends part of its body and hangs there; meanwhile
    // the others (two whole, one cut) go to the same path; the first one is cut off once a
    // seeded number of them (none to all three) have been answered.
    let release!: () => void;
    const cutFirst = new Promise<void>((r) => (release = r));
    let firstDone = false;
    const first = upload(path, randomBytes(256 * 1024), 1 + rng.int(128 * 1024), cutFirst).finally(() => (firstDone = true));
    await until(() => existsSync(path) || firstDone, "the first upload's file never appeared");
    const answeredBeforeCut = rng.int(4);
    let answered = 0;
    if (answeredBeforeCut === 0) release();
    const others = Array.from({ length: 3 }, async (_, k) => {
      const content = randomBytes(16 * 1024 + rng.int(128 * 1024));
      const cut = k === 2 ? 1 + rng.int(content.length - 1) : undefined;
      if (cut === undefined) whole.add(sha(content));
      const status = await upload(path, content, cut);
      if (++answered === answeredBeforeCut) release();
      return { status, cut };
    });
    const results = [{ status: await first, cut: 0 }, ...(await Promise.all(others))];
    const ok = results.filter((r) => r.status === 200).length;
    // The daemon learns of a cut connection after the client closed it: wait until it let go of the file.
    await uploadsSettled(path);
    const now = existsSync(path) ? sha(readFileSync(path)) : "absent";
    if (ok > 0 && !whole.has(now)) lost.push(`${path}: ${ok} upload(s) answered 200, file is ${now === "absent" ? "gone" : "foreign"}`);
  });
  assert.deepEqual(lost, [], "committed uploads lost to a concurrent failed one");
  // nothing but the targets: no temp file, and no file named after a handle ("new-1.bin (deleted)")
  assert.deepEqual(readdirSync(join(scratch, "race")).filter((n) => !/^new-\d+\.bin$/.test(n)), [], "no other files");
});

test("stream requests aborted before their first message leave nothing behind (h1 and h2)", async () => {
  await atRest();
  const base = procStats(d.pid).fds;
  const n = budget(100, 1000);
  await pool(Array.from({ length: n }, (_, i) => i), 32, async (i) => {
    const rng = new Rng(i);
    if (i % 2) await ops.watchH1(rng);
    else await ops.watchH2(rng);
  });
  const fds = await settleFds(d.pid, base + 2, 20_000);
  assert.ok(fds <= base + 2, `${fds} descriptors open after aborted watches, baseline ${base}`);
  await assertHealthy(d, "after aborted watches");
});
