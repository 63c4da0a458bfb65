import { readFileSync } from "node:fs";

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

/** Summarises a V8 .heapsnapshot: object count and self size grouped by type and constructor name. */
function main(file: string, top = 30): void {
  const s = JSON.parse(readFileSync(file, "utf8")) as Snapshot;
  const fields = s.snapshot.meta.node_fields;
  const types = s.snapshot.meta.node_types[0];
  const width = fields.length;
  const iType = fields.indexOf("type");
  const iName = fields.indexOf("name");
  const iSize = fields.indexOf("self_size");
  const groups = new Map<string, { count: number; bytes: number }>();
  let total = 0;
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + iType]];
    let name = s.strings[s.nodes[i + iName]] ?? "";
    if (type === "string" || type === "concatenated string" || type === "sliced string") name = "";
    if (name.length > 60) name = name.slice(0, 57) + "...";
    const key = `${type}: ${name}`;
    const g = groups.get(key) ?? { count: 0, bytes: 0 };
    g.count++;
    g.bytes += s.nodes[i + iSize];
    total += s.nodes[i + iSize];
    groups.set(key, g);
  }
  process.stdout.write(`${file}: ${(total / 2 ** 20).toFixed(1)} MiB in ${s.nodes.length / width} objects\n`);
  for (const [k, g] of [...groups].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, top)) {
    process.stdout.write(`${(g.bytes / 2 ** 20).toFixed(2).padStart(9)} MiB ${String(g.count).padStart(9)}  ${k}\n`);
  }
}

main(process.argv[2] ?? "", Number(process.argv[3] ?? 30));
