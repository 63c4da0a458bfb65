import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT, startDaemon } from "../helpers/daemon.js";
import { clients, sdkSandbox, tempDir } from "../helpers/clients.js";
import { lazy } from "../../../src/envd/platform/lazy.js";
import { TrimPolicy } from "../../../src/envd/platform/memory.js";
import { loadInotify } from "../../../src/envd/filesystem/inotify.js";

/** Native addons mapped into a process. */
function addons(pid: number): string[] {
  return readFileSync(`/proc/${pid}/maps`, "utf8")
    .split("\n")
    .map((l) => l.split(/\s+/)[5] ?? "")
    .filter((f) => f.endsWith(".node"));
}

test("lazy() loads a package once, on the first call", () => {
  let calls = 0;
  const get = lazy<typeof import("range-parser")>("range-parser", () => {
    calls++;
    throw new Error("the bundled path is only taken inside dist/envd");
  });
  const parse = get();
  assert.equal(typeof parse, "function");
  assert.deepEqual([...(parse(10, "bytes=0-1") as Array<{ start: number; end: number }>)], [{ start: 0, end: 1 }]);
  assert.equal(get(), parse);
  assert.equal(calls, 0);
});

test("an idle daemon has not loaded node-pty or xattr; the first PTY and metadata use load them", async () => {
  const d = await startDaemon();
  const t = await tempDir("footprint");
  try {
    const idle = addons(d.pid);
    assert.equal(idle.some((f) => f.endsWith("pty.node")), false, `pty.node mapped at idle: ${idle.join(", ")}`);
    assert.equal(idle.some((f) => f.includes("xattr")), false, `xattr addon mapped at idle: ${idle.join(", ")}`);
    const sbx = await sdkSandbox(d.url);
    let out = "";
    const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: (b: Uint8Array) => void (out += Buffer.from(b).toString()) });
    await sbx.pty.sendInput(pty.pid, new TextEncoder().encode("echo pty-$((6*7))\nexit\n"));
    await pty.wait().catch(() => undefined);
    assert.match(out, /pty-42/);
    await sbx.files.write(join(t.path, "f.txt"), "x");
    await sbx.files.getInfo(join(t.path, "f.txt"));
    const used = addons(d.pid);
    assert.ok(used.some((f) => f.endsWith("pty.node")), `pty.node not mapped after a PTY: ${used.join(", ")}`);
    assert.ok(used.some((f) => f.includes("xattr")), `xattr addon not mapped after file metadata: ${used.join(", ")}`);
  } finally {
    await t.cleanup();
    await d.stop();
  }
});

/** Waits until the daemon's output matches `re` (an event it logs), failing after 30 s. */
async function logged(logs: () => string, re: RegExp): Promise<void> {
  for (let i = 0; i < 600 && !re.test(logs()); i++) await new Promise((r) => setTimeout(r, 50));
  assert.match(logs(), re);
}

test("a daemon that just started has not loaded undici (fetch, Headers: +18 MiB RSS when loaded), http2 or crypto; its first quiet second loads crypto (a token's checks), the first h2c connection http2, and serving never loads undici", async () => {
  const t = await tempDir("footprint-modules");
  // A preload of this test's: on SIGUSR2 the daemon writes the internal modules it has loaded.
  const preload = join(t.path, "modules.cjs");
  const list = join(t.path, "modules.txt");
  // Written whole, then renamed: the test reads it as soon as it exists.
  writeFileSync(preload, `process.on("SIGUSR2", () => { const fs = require("fs"); fs.writeFileSync(${JSON.stringify(list + ".part")}, process.moduleLoadList.join("\\n")); fs.renameSync(${JSON.stringify(list + ".part")}, ${JSON.stringify(list)}); });`);
  const d = await startDaemon({ env: { NODE_OPTIONS: `--require ${preload}` }, args: ["--log-level", "debug"] });
  const loaded = async (): Promise<string> => {
    process.kill(d.pid, "SIGUSR2");
    for (let i = 0; i < 100 && !existsSync(list); i++) await new Promise((r) => setTimeout(r, 20));
    return readFileSync(list, "utf8");
  };
  try {
    const idle = await loaded();
    assert.match(idle, /NativeModule http\b/, "the list is the daemon's");
    assert.doesNotMatch(idle, /undici/, "undici loaded at start");
    // Modules only some requests need load with the first of them (each is start-up time).
    assert.doesNotMatch(idle, /NativeModule http2\b/, "http2 loaded at start");
    // crypto comes with the first quiet second's trim (which may have run already), not at start
    if (/NativeModule crypto\b/.test(idle)) await logged(d.logs, /released free memory/);
    unlinkSync(list);
    await logged(d.logs, /released free memory/);
    const trimmed = await loaded();
    assert.match(trimmed, /NativeModule crypto\b/, "the first trim loads the token checks");
    assert.doesNotMatch(trimmed, /NativeModule http2\b/, "http2 loaded by the trim");
    unlinkSync(list);
    const h2 = clients(d.url);
    await h2.fs.binary.stat({ path: "/" });
    const after = await loaded();
    assert.match(after, /NativeModule http2\b/, "an h2c call loads http2");
    // Connect's Headers (call contexts, errors, ends of streams) are envd's own: serving does not load undici either.
    unlinkSync(list);
    const sbx = await sdkSandbox(d.url);
    assert.equal((await sbx.commands.run("echo used")).stdout, "used\n");
    await assert.rejects(sbx.files.getInfo(join(t.path, "missing")), /not found|does not exist/i);
    await sbx.files.write(join(t.path, "w.txt"), "x");
    assert.equal(await sbx.files.read(join(t.path, "w.txt")), "x");
    const watch = await sbx.files.watchDir(t.path, () => undefined);
    await watch.stop();
    await assert.rejects(h2.fs.json.listDir({ path: join(t.path, "missing") }));
    const used = await loaded();
    assert.match(used, /NativeModule http2\b/, "the list is the same daemon's");
    assert.doesNotMatch(used, /undici/, "serving loaded undici");
  } finally {
    await d.stop();
    t.cleanup();
  }
});

test("TurboFan and Sparkplug are off while starting and back on once startupDone() runs", () => {
  // Children with natives syntax report V8's tier of a warmed function before and after.
  const mod = join(ROOT, "build", "src", "envd", "startup-flags.js");
  const script = `
    const { startupDone } = await import(${JSON.stringify(mod)});
    const OPTIMIZED = 1 << 4; // V8 OptimizationStatus::kOptimized
    const BASELINE = 1 << 15; // V8 OptimizationStatus::kBaseline (Sparkplug's code)
    const make = () => new Function("x", "let s = 0; for (let i = 0; i < 50; i++) s += (x * i) % 7; return s;");
    const tier = (f, n) => { for (let i = 0; i < n; i++) f(i); const st = %GetOptimizationStatus(f); return st & OPTIMIZED ? "optimized" : st & BASELINE ? "baseline" : "interpreted"; };
    const before = tier(make(), 200000);
    startupDone();
    console.log(before + " " + tier(make(), 200000));
  `;
  const run = (flags: string[]) => execFileSync(process.execPath, ["--allow-natives-syntax", ...flags, "--input-type=module", "-e", script], { encoding: "utf8" }).trim();
  assert.equal(run([]), "interpreted optimized");
  // With the optimising tiers off from the command line (left alone), Sparkplug alone comes back.
  assert.equal(run(["--no-turbofan", "--no-maglev"]), "interpreted baseline");
});

test("TrimPolicy trims only after quiet ticks with RSS well above its floor, and not again for the same memory", () => {
  const MiB = 1024 * 1024;
  const p = new TrimPolicy(50 * MiB, 16 * MiB, 2, 0.02);
  assert.equal(p.due(0.9, 51 * MiB), false, "busy");
  assert.equal(p.due(0.01, 51 * MiB), true, "once after start, on the first quiet tick, whatever the slack");
  p.trimmed(50 * MiB);
  assert.equal(p.due(0.9, 150 * MiB), false, "busy");
  assert.equal(p.due(0.01, 150 * MiB), false, "one quiet tick is not enough");
  assert.equal(p.due(0.01, 150 * MiB), true, "quiet twice, 100 MiB above the floor");
  p.trimmed(100 * MiB);
  assert.equal(p.due(0.0, 100 * MiB), false);
  assert.equal(p.due(0.0, 110 * MiB), false, "within the slack of the new floor");
  assert.equal(p.due(0.0, 60 * MiB), false, "V8 shrank its heap: the floor follows RSS down");
  assert.equal(p.due(0.5, 90 * MiB), false, "busy again");
  assert.equal(p.due(0.0, 90 * MiB), false);
  assert.equal(p.due(0.0, 90 * MiB), true, "30 MiB above the lowered floor after two quiet ticks");
});

test("reduceHeap gives back the young generation that a burst grew, without exposing gc to the daemon's scope", { skip: Number(process.versions.node.split(".")[0]) < 22 ? "V8 before Node 22 has no last-resort gc flavor" : false }, () => {
  const script = `
    import { getHeapSpaceStatistics } from "node:v8";
    import { reduceHeap } from ${JSON.stringify(new URL("../../../src/envd/platform/heap.js", import.meta.url).href)};
    const young = () => getHeapSpaceStatistics().find((s) => s.space_name === "new_space").space_size;
    const keep = [];
    for (let r = 0; r < 60; r++) { const a = []; for (let i = 0; i < 100000; i++) a.push({ r, i }); keep.push(a.length); }
    const before = young();
    const ms = reduceHeap();
    console.log(JSON.stringify({ before, after: young(), ms, gc: typeof globalThis.gc }));`;
  const out = JSON.parse(execFileSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" })) as { before: number; after: number; ms: unknown; gc: string };
  assert.ok(out.before >= 4 * 1024 * 1024, `the burst grew the young generation (${out.before} bytes)`);
  assert.ok(out.after <= out.before / 4, `reduced from ${out.before} to ${out.after} bytes`);
  assert.equal(typeof out.ms, "number");
  assert.equal(out.gc, "undefined", "gc stays out of the global scope");
});

test("the addon's trimMalloc hands freed C heap back (glibc)", () => {
  const addon = loadInotify() as unknown as { trimMalloc(): boolean };
  assert.equal(typeof addon.trimMalloc, "function");
  const bufs = Array.from({ length: 256 }, () => Buffer.alloc(64 * 1024, 1));
  bufs.length = 0;
  assert.equal(typeof addon.trimMalloc(), "boolean");
});
