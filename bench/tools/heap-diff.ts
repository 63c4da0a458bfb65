/**
 * Compares two V8 .heapsnapshot files: object count and self size per type and constructor name,
 * the groups that grew most first (what a churn leaves behind). Usage:
 * node build/bench/tools/heap-diff.js BEFORE AFTER [TOP]
 */
import { readFileSync } from "node:fs";

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

type Groups = Map<string, { count: number; bytes: number }>;

/** Object count and self size per "type: name" of one snapshot (strings grouped by type alone). */
function groups(file: string): Groups {
  const s = JSON.parse(readFileSync(file, "utf8")) as Snapshot;
  const fields = s.snapshot.meta.node_fields;
  const types = s.snapshot.meta.node_types[0];
  const width = fields.length;
  const [iType, iName, iSize] = ["type", "name", "self_size"].map((f) => fields.indexOf(f));
  const out: Groups = new Map();
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + iType]];
    let name = type.includes("string") || type === "number" ? "" : (s.strings[s.nodes[i + iName]] ?? "");
    if (name.length > 70) name = name.slice(0, 67) + "...";
    const key = `${type}: ${name}`;
    const g = out.get(key) ?? { count: 0, bytes: 0 };
    g.count++;
    g.bytes += s.nodes[i + iSize];
    out.set(key, g);
  }
  return out;
}

const [a, b, top] = [groups(process.argv[2]), groups(process.argv[3]), Number(process.argv[4] ?? 40)];
const total = (g: Groups) => [...g.values()].reduce((n, x) => n + x.bytes, 0);
process.stdout.write(`self size ${(total(a) / 2 ** 20).toFixed(1)} → ${(total(b) / 2 ** 20).toFixed(1)} MiB\n`);
const rows = [...new Set([...a.keys(), ...b.keys()])].map((k) => {
  const x = a.get(k) ?? { count: 0, bytes: 0 };
  const y = b.get(k) ?? { count: 0, bytes: 0 };
  return { k, dc: y.count - x.count, db: y.bytes - x.bytes, n: y.count };
});
for (const r of rows.sort((p, q) => q.dc - p.dc).slice(0, top)) {
  process.stdout.write(`${String(r.dc).padStart(8)} objs ${(r.db / 1024).toFixed(0).padStart(8)} KiB  (now ${r.n})  ${r.k}\n`);
}
