/**
 * What the snapshot scenario's SDK user runs, in a fresh Node through the published SDK: forks of
 * a sandbox holding written data (latency, `count`, and the storage pool's space as they run),
 * snapshots of a sandbox holding more (the call, and the stall a process inside it sees), creates
 * from a snapshot against creates from the template, and pause to disk with its resume. Each
 * script prints one JSON line; times are milliseconds, `mono` ones on CLOCK_MONOTONIC.
 */

/** The settings a script reads as its `CFG`. */
export type ScriptConfig = Record<string, string | number>;

/** Helpers every script starts with: the SDK, a checked command, a data writer, the pool's use. */
const PRELUDE = `
const { Sandbox } = await import("e2b");
const fs = await import("node:fs");
const { execFileSync } = await import("node:child_process");
const now = () => performance.now();
const mono = () => Number(process.hrtime.bigint()) / 1e6;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function must(sbx, cmd, opts = {}) {
  const r = await sbx.commands.run(cmd, { timeoutMs: 600_000, ...opts });
  if (r.exitCode !== 0) throw new Error(cmd + " exited " + r.exitCode);
  return r;
}
const write = (sbx, mib, flush) => must(sbx, "dd if=/dev/urandom of=/home/user/data bs=1M count=" + mib + " status=none" + (flush ? " conv=fsync" : ""));
// every disk's dirty blocks written through to the pool's file system, then what it has allocated:
// as it is, and once XFS has dropped speculative preallocation (what its background GC does within minutes).
// Two syncs: the first flushes the sandboxes' ext4 file systems into their images after it has passed
// the pool's (their loop devices write through the page cache), which the second writes; after one,
// statfs still counts XFS's reservations for those writes (several blocks each, released at writeback)
function poolUsed() {
  execFileSync("sync");
  execFileSync("sync");
  const used = () => { const s = fs.statfsSync(CFG.pool); return (s.blocks - s.bfree) * s.bsize; };
  const raw = used();
  try { execFileSync("xfs_spaceman", ["-c", "prealloc -s", CFG.pool], { stdio: "ignore" }); } catch { return { raw, trimmed: raw }; }
  return { raw, trimmed: used() };
}
// at most four calls at once: a busy sandboxd answers a burst of connects late
async function each(items, fn) {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(4, items.length) }, async () => { while (next < items.length) await fn(items[next++]); }));
}
const forksOf = async (parent, count) => {
  const got = await parent.fork({ count, timeoutMs: 600_000 });
  for (const f of got) if (f instanceof Error) throw f;
  return got;
};
`;

/** A script body with its settings and the prelude before it. */
export function script(body: string, cfg: ScriptConfig): string {
  return `const CFG = ${JSON.stringify(cfg)};\n${PRELUDE}\n${body}`;
}

/**
 * Forks: a parent with `forkMiB` written; the pool's use before it (after a warm-up sandbox made
 * the golden image), with it, and with `n` forks of it answering a command; then `rounds` single
 * forks → first command, and one fork of `count` → first command in every fork.
 */
export const FORKS = `
const w = await Sandbox.create({ timeoutMs: 600_000 });
await must(w, "true");
await w.kill();
await sleep(1000);
const u0 = poolUsed();
const parent = await Sandbox.create({ timeoutMs: 3_600_000 });
await write(parent, CFG.forkMiB, true);
const u1 = poolUsed();
const parentBlocks = fs.statSync(CFG.pool + "/disks/" + parent.sandboxId + ".img").blocks * 512;
const many = [];
const t0 = now();
while (many.length < CFG.n) many.push(...(await forksOf(parent, Math.min(CFG.maxPerFork, CFG.n - many.length))));
await each(many, (f) => must(f, "true"));
const nMs = now() - t0;
const u2 = poolUsed();
await each(many, (f) => f.kill());
const one = [];
for (let i = 0; i < CFG.rounds; i++) {
  const t = now();
  const [f] = await forksOf(parent, 1);
  await must(f, "true");
  one.push(now() - t);
  await f.kill();
}
const t1 = now();
const group = await forksOf(parent, CFG.count);
await Promise.all(group.map((f) => must(f, "true")));
const countMs = now() - t1;
await each(group, (f) => f.kill());
await parent.kill();
console.log(JSON.stringify({ u0, u1, u2, parentBlocks, nMs, one, countMs }));
`;

/** Inside the sandbox: wakes every millisecond and records each gap over 2 ms until told to stop. */
const STALL_PY = [
  "import json, os, time",
  "gaps = []",
  "t = time.monotonic_ns()",
  "open('/tmp/stall-ready', 'w').close()",
  "while not os.path.exists('/tmp/stall-stop'):",
  "    time.sleep(0.001)",
  "    n = time.monotonic_ns()",
  "    if n - t > 2000000: gaps.append([t / 1e6, n / 1e6])",
  "    t = n",
  "json.dump(gaps, open('/tmp/stall.tmp', 'w'))",
  "os.rename('/tmp/stall.tmp', '/tmp/stall.json')",
].join("\n");

/**
 * Snapshots: a sandbox with `snapMiB` written (left for the snapshot to flush) and a stall
 * recorder running in it; `rounds` snapshots, `rounds` bare `runc pause` + `resume` of it and
 * `rounds` getInfo calls, each window timed; then creates from the first snapshot and from the
 * template → first command, interleaved.
 */
export const SNAPSHOTS = `
const sbx = await Sandbox.create({ timeoutMs: 3_600_000 });
await write(sbx, CFG.snapMiB, false);
await sbx.files.write("/tmp/stall.py", ${JSON.stringify(STALL_PY)});
await sbx.commands.run("python3 /tmp/stall.py", { background: true });
while (!(await sbx.files.exists("/tmp/stall-ready"))) await sleep(50);
const snaps = [], calls = [], pauses = [], info = [];
for (let i = 0; i < CFG.rounds; i++) {
  await sleep(300);
  const a = mono();
  snaps.push((await sbx.createSnapshot()).snapshotId);
  calls.push([a, mono()]);
}
for (let i = 0; i < CFG.rounds; i++) {
  await sleep(300);
  const a = mono();
  execFileSync("runc", ["--root", CFG.runcRoot, "pause", sbx.sandboxId]);
  execFileSync("runc", ["--root", CFG.runcRoot, "resume", sbx.sandboxId]);
  pauses.push([a, mono()]);
}
for (let i = 0; i < CFG.rounds; i++) {
  const a = mono();
  await sbx.getInfo();
  info.push(mono() - a);
}
await sbx.files.write("/tmp/stall-stop", "");
while (!(await sbx.files.exists("/tmp/stall.json"))) await sleep(50);
const gaps = JSON.parse(await sbx.files.read("/tmp/stall.json"));
await sbx.kill();
const fromSnap = [], fromTpl = [];
for (let i = 0; i < CFG.rounds; i++) {
  for (const [ref, into] of i % 2 ? [[snaps[0], fromSnap], [undefined, fromTpl]] : [[undefined, fromTpl], [snaps[0], fromSnap]]) {
    const t = now();
    const s = ref ? await Sandbox.create(ref, { timeoutMs: 600_000 }) : await Sandbox.create({ timeoutMs: 600_000 });
    await must(s, "true");
    into.push(now() - t);
    await s.kill();
  }
}
for (const id of snaps) await Sandbox.deleteSnapshot(id);
console.log(JSON.stringify({ calls, pauses, info, gaps, fromSnap, fromTpl }));
`;

/**
 * Pause to disk and resume of an idle sandbox, `rounds` times: pause({ keepMemory: false }),
 * Sandbox.connect (the resume) and its first command; beside a create → first command and a
 * kill of an idle sandbox.
 */
export const PAUSES = `
const pause = [], resume = [], resumeFirst = [], create = [], createFirst = [], kill = [];
for (let i = 0; i < CFG.rounds; i++) {
  let t = now();
  const sbx = await Sandbox.create({ timeoutMs: 600_000 });
  create.push(now() - t);
  await must(sbx, "true");
  createFirst.push(now() - t);
  await sleep(CFG.idleMs);
  t = now();
  await sbx.pause({ keepMemory: false });
  pause.push(now() - t);
  t = now();
  const back = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 600_000 });
  resume.push(now() - t);
  await must(back, "true");
  resumeFirst.push(now() - t);
  await sleep(CFG.idleMs);
  t = now();
  await back.kill();
  kill.push(now() - t);
}
console.log(JSON.stringify({ pause, resume, resumeFirst, create, createFirst, kill }));
`;
