#!/usr/bin/env node
// Draws a program's imports: the edges between its folders (with how many file imports each
// carries) and every circle between its files. Type-only imports count: a circle of types is
// still a circle to read through.
//   node scripts/imports.mjs [root ...]          (default: src/sandboxd src/envd)
//   --forbid=from:to[,from:to]   exit 1 when any file in folder `from` imports folder `to`
//   --strict                     exit 1 when there is a circle between files
import { readdirSync, readFileSync, statSync, existsSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const args = process.argv.slice(2);
const roots = args.filter((a) => !a.startsWith("--"));
const forbid = (args.find((a) => a.startsWith("--forbid="))?.slice(9).split(",") ?? []).filter(Boolean).map((p) => p.split(":"));
const strict = args.includes("--strict");

function walk(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return walk(p);
    return p.endsWith(".ts") && !p.endsWith(".d.ts") ? [p] : [];
  });
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+["'](\.[^"']+)["']|(?:^|\n)\s*import\s+["'](\.[^"']+)["']|import\(\s*["'](\.[^"']+)["']\s*\)/g;

/** The file's relative imports, resolved to .ts paths that exist. */
function importsOf(file) {
  const text = readFileSync(file, "utf8");
  const out = new Set();
  for (const m of text.matchAll(IMPORT)) {
    const spec = m[1] ?? m[2] ?? m[3];
    const base = resolve(dirname(file), spec);
    const candidates = [base.replace(/\.js$/, ".ts"), base + ".ts", join(base, "index.ts")];
    const hit = candidates.find((c) => existsSync(c) && statSync(c).isFile());
    if (hit) out.add(hit);
  }
  return [...out];
}

/** Strongly connected components of more than one file (or a file importing itself): the circles. */
function circles(graph) {
  let index = 0;
  const idx = new Map(), low = new Map(), onStack = new Set(), stack = [], out = [];
  const visit = (v) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const scc = [];
      let w;
      do {
        w = stack.pop();
        onStack.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) out.push(scc.sort());
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return out;
}

let failed = false;
for (const root of roots.length ? roots : ["src/sandboxd", "src/envd"]) {
  const abs = resolve(root);
  const files = walk(abs);
  const graph = new Map(files.map((f) => [f, importsOf(f)]));
  const folder = (f) => {
    const rel = relative(abs, f);
    return rel.includes("/") ? rel.split("/")[0] : ".";
  };
  const edges = new Map();
  for (const [f, deps] of graph) {
    for (const d of deps) {
      if (!d.startsWith(abs + "/")) continue;
      const [a, b] = [folder(f), folder(d)];
      if (a === b) continue;
      const key = `${a} -> ${b}`;
      edges.set(key, (edges.get(key) ?? 0) + 1);
      if (forbid.some(([x, y]) => x === a && y === b)) {
        console.log(`FORBIDDEN ${relative(abs, f)} -> ${relative(abs, d)}`);
        failed = true;
      }
    }
  }
  console.log(`${root}: ${files.length} files`);
  console.log("folder edges (file imports):");
  for (const [k, n] of [...edges].sort()) console.log(`  ${k} (${n})`);
  const found = circles(graph);
  console.log(found.length ? "circles between files:" : "circles between files: none");
  for (const c of found) console.log(`  ${c.map((f) => relative(abs, f)).join(" <-> ")}`);
  if (strict && found.length) failed = true;
}
process.exit(failed ? 1 : 0);
