import { readFileSync } from "node:fs";
import { basename } from "node:path";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  hitCount?: number;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
}

/** Summarises a V8 .cpuprofile: self time by function and by module, top entries first. */
function main(file: string, top = 30): void {
  const p = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
  const totalMs = (p.endTime - p.startTime) / 1000;
  const perSample = totalMs / Math.max(1, p.samples.length);
  const byFn = new Map<string, number>();
  const byModule = new Map<string, number>();
  for (const n of p.nodes) {
    const hits = n.hitCount ?? 0;
    if (!hits) continue;
    const f = n.callFrame;
    const where = f.url ? `${basename(f.url)}:${f.lineNumber + 1}` : "(native)";
    const key = `${f.functionName || "(anonymous)"}  ${where}`;
    byFn.set(key, (byFn.get(key) ?? 0) + hits * perSample);
    const mod = f.url ? modName(f.url) : f.functionName.startsWith("(") ? f.functionName : "(native)";
    byModule.set(mod, (byModule.get(mod) ?? 0) + hits * perSample);
  }
  const print = (title: string, m: Map<string, number>) => {
    process.stdout.write(`\n${title}\n`);
    for (const [k, ms] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top)) {
      process.stdout.write(`${ms.toFixed(0).padStart(8)} ms ${((100 * ms) / totalMs).toFixed(1).padStart(5)}%  ${k}\n`);
    }
  };
  process.stdout.write(`${file}: ${totalMs.toFixed(0)} ms wall, ${p.samples.length} samples`);
  print("self time by function", byFn);
  print("self time by module", byModule);
  print("total time (self + callees) by function", inclusive(p, perSample));
}

/** Self plus callee time per function, each function counted once per stack (recursion-safe). */
function inclusive(p: CpuProfile, perSample: number): Map<string, number> {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const key = (n: ProfileNode) => `${n.callFrame.functionName || "(anonymous)"}  ${n.callFrame.url ? `${basename(n.callFrame.url)}:${n.callFrame.lineNumber + 1}` : "(native)"}`;
  const out = new Map<string, number>();
  for (const n of p.nodes) {
    const hits = n.hitCount ?? 0;
    if (!hits || n.callFrame.functionName === "(idle)") continue;
    const seen = new Set<string>();
    for (let id: number | undefined = n.id; id !== undefined; id = parent.get(id)) {
      const k = key(byId.get(id)!);
      if (seen.has(k)) continue;
      seen.add(k);
      out.set(k, (out.get(k) ?? 0) + hits * perSample);
    }
  }
  return out;
}

function modName(url: string): string {
  const nm = url.lastIndexOf("node_modules/");
  if (nm >= 0) return url.slice(nm + 13).split("/").slice(0, url.slice(nm + 13).startsWith("@") ? 2 : 1).join("/");
  if (url.startsWith("node:")) return url;
  return basename(url);
}

main(process.argv[2] ?? "", Number(process.argv[3] ?? 30));
