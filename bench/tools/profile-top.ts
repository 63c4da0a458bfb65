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
}

function modName(url: string): string {
  const nm = url.lastIndexOf("node_modules/");
  if (nm >= 0) return url.slice(nm + 13).split("/").slice(0, url.slice(nm + 13).startsWith("@") ? 2 : 1).join("/");
  if (url.startsWith("node:")) return url;
  return basename(url);
}

main(process.argv[2] ?? "", Number(process.argv[3] ?? 30));
