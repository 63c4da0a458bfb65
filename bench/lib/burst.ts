import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { localRun, startToEnd } from "./process-stream.js";
import { memStatus } from "./procfs.js";
import { mib, now, sleep } from "./stats.js";
import { benchTransports } from "./transports.js";

/** Anonymous (private, non-file) memory of `pid` in bytes, from /proc/<pid>/smaps_rollup. */
export function anonymous(pid: number): number {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
  return Number(/^Anonymous:\s+(\d+) kB/m.exec(text)?.[1] ?? NaN) * 1024;
}

/**
 * A burst of work: `commands` echo commands over Connect JSON (as the e2b SDK sends them), one
 * download of a `downloadMiB` file of random bytes as `fetch` asks for it (gzip negotiated, as the
 * SDKs' files.read), and `watchers` recursive watches held open for 1.5 s.
 */
export async function burst(url: string, tmp: string, o: { commands: number; downloadMiB: number; watchers: number }): Promise<void> {
  const t = benchTransports(url);
  for (let i = 0; i < o.commands; i++) {
    const out = await startToEnd(t.proc.json, "/bin/echo", ["burst", String(i)]);
    if (out.exitCode !== 0) throw new Error(`burst: echo ended with ${out.exitCode}`);
  }
  const dir = join(tmp, "burst");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, "random.bin");
  await localRun("sh", ["-c", `head -c ${o.downloadMiB * 2 ** 20} /dev/urandom > '${file}'`]);
  const res = await fetch(`${url}/files?path=${encodeURIComponent(file)}&username=root`);
  if (res.status !== 200) throw new Error(`burst: download answered ${res.status}`);
  let n = 0;
  for await (const chunk of res.body!) n += (chunk as Uint8Array).byteLength;
  if (n !== o.downloadMiB * 2 ** 20) throw new Error(`burst: downloaded ${n} bytes`);
  const ac = new AbortController();
  const watches = Array.from({ length: o.watchers }, async (_, i) => {
    const w = join(dir, `w${i}`);
    mkdirSync(w);
    try {
      for await (const _ev of t.fs.json.watchDir({ path: w, recursive: true }, { signal: ac.signal })) void _ev;
    } catch {
      // aborted below
    }
  });
  await sleep(1500);
  ac.abort();
  await Promise.all(watches);
  rmSync(dir, { recursive: true, force: true });
}

/** RSS and anonymous memory of `pid` (MiB) at each of `at` seconds after `startedAt` (a now() reading). */
export async function memoryAfter(pid: number, startedAt: number, at: number[]): Promise<{ s: number; rss: number; anon: number }[]> {
  const out: { s: number; rss: number; anon: number }[] = [];
  for (const s of at) {
    const wait = startedAt + s * 1000 - now();
    if (wait > 0) await sleep(wait);
    out.push({ s, rss: mib(memStatus(pid).rss), anon: mib(anonymous(pid)) });
  }
  return out;
}
