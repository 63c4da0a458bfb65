#!/usr/bin/env node
// The import drawing of the programs under src/: for each program (src/envd, src/sandboxd, or the
// folders named on the command line) the edges between its rooms (first-level folders; files at
// its top are the room "."), and every circle between files. Exits 1 when there is a circle.
//
//   node scripts/imports.mjs [--files] [--runtime] [program folder...]
//
// --files lists, under each room edge, the file edges that make it. --runtime leaves type-only
// imports out (what Node loads); by default they count, since they are dependencies of the design.
//
// Imports are read line by line, not parsed: a static import or re-export starts a line outside a
// block comment and names its module in `from "..."` (or `import "..."`); a dynamic `import("...")`
// counts wherever it stands outside a comment. Only relative specifiers make edges.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";

const args = process.argv.slice(2);
const showFiles = args.includes("--files");
const runtimeOnly = args.includes("--runtime");
const roots = args.filter((a) => !a.startsWith("--"));
const programs = roots.length > 0 ? roots : ["src/envd", "src/sandboxd"];

/** Every .ts file below `dir` (declaration files left out). */
function tsFiles(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...tsFiles(path));
    else if (name.endsWith(".ts") && !name.endsWith(".d.ts")) out.push(path);
  }
  return out;
}

/** The relative imports of one source text: [{ spec, typeOnly, dynamic }]. */
function importsOf(text) {
  const found = [];
  const lines = text.split("\n");
  let inBlock = false;
  for (let i = 0; i < lines.length; i++) {
    let line = lines[i];
    if (inBlock) {
      const end = line.indexOf("*/");
      if (end < 0) continue;
      inBlock = false;
      line = line.slice(end + 2);
    }
    const trimmed = line.trimStart();
    if (trimmed.startsWith("/*") && !trimmed.includes("*/")) {
      inBlock = true;
      continue;
    }
    const code = line.replace(/(^|[^:"'`])\/\/.*$/, "$1");
    if (/^\s*import\b(?!\s*\()|^\s*export\s+(type\s*)?[{*]/.test(code)) {
      let statement = code;
      let j = i;
      while (!/\bfrom\s*["'][^"']+["']|^\s*import\s*["'][^"']+["']|;\s*$/.test(statement) && j + 1 < lines.length) {
        statement += "\n" + lines[++j];
      }
      i = j;
      const spec = /\bfrom\s*["']([^"']+)["']/.exec(statement)?.[1] ?? /^\s*import\s*["']([^"']+)["']/.exec(statement)?.[1];
      if (spec) {
        const head = statement.replace(/\bfrom\s*["'][^"']+["'][\s\S]*$/, "");
        const braces = /\{([\s\S]*)\}/.exec(head)?.[1];
        const names = braces ? braces.split(",").map((s) => s.trim()).filter(Boolean) : [];
        const clauseTyped = /^\s*(import|export)\s+type\b/.test(head);
        const allNamesTyped = braces !== undefined && names.length > 0 && names.every((n) => n.startsWith("type "))
          && !/^\s*import\s+[\w$]+\s*,/.test(head) && !/\*\s+as\b/.test(head);
        found.push({ spec, typeOnly: clauseTyped || allNamesTyped, dynamic: false });
      }
      continue;
    }
    for (const m of code.matchAll(/(typeof\s+)?\bimport\(\s*["']([^"']+)["']\s*\)/g)) {
      found.push({ spec: m[2], typeOnly: Boolean(m[1]), dynamic: !m[1] });
    }
  }
  return found.filter((f) => f.spec.startsWith("."));
}

/** The file a relative specifier names (NodeNext style: "./x.js" is ./x.ts), or undefined. */
function target(from, spec, known) {
  const base = resolve(dirname(from), spec);
  for (const candidate of [base.replace(/\.js$/, ".ts"), base, `${base}.ts`, join(base, "index.ts")]) {
    if (known.has(candidate)) return candidate;
  }
  return undefined;
}

/** The room of a file: its first folder below the program, "." at the top. */
function roomOf(program, file) {
  const parts = relative(program, file).split(sep);
  return parts.length > 1 ? parts[0] : ".";
}

/** Circles between files: Tarjan's strongly connected components with more than one file, or a file importing itself. */
function circles(graph) {
  let index = 0;
  const idx = new Map(), low = new Map(), onStack = new Set(), stack = [], out = [];
  const visit = (v) => {
    idx.set(v, index); low.set(v, index); index++;
    stack.push(v); onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) { visit(w); low.set(v, Math.min(low.get(v), low.get(w))); }
      else if (onStack.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const scc = [];
      let w;
      do { w = stack.pop(); onStack.delete(w); scc.push(w); } while (w !== v);
      if (scc.length > 1 || (graph.get(v) ?? new Set()).has(v)) out.push(scc.sort());
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return out;
}

let failed = false;
for (const program of programs) {
  const root = resolve(program);
  const files = tsFiles(root);
  const known = new Set(files);
  const graph = new Map(files.map((f) => [f, new Set()]));
  const rooms = new Map();
  for (const file of files) {
    for (const imp of importsOf(readFileSync(file, "utf8"))) {
      if (runtimeOnly && imp.typeOnly) continue;
      const to = target(file, imp.spec, known);
      if (!to) continue;
      graph.get(file).add(to);
      const a = roomOf(root, file), b = roomOf(root, to);
      if (a === b) continue;
      const key = `${a} -> ${b}`;
      if (!rooms.has(key)) rooms.set(key, []);
      rooms.get(key).push(`${relative(root, file)} -> ${relative(root, to)}${imp.typeOnly ? " (type)" : ""}${imp.dynamic ? " (dynamic)" : ""}`);
    }
  }
  console.log(`${program}: ${files.length} files, room edges (files making them):`);
  for (const key of [...rooms.keys()].sort()) {
    const edges = rooms.get(key);
    const types = edges.filter((e) => e.endsWith("(type)")).length;
    console.log(`  ${key}  ${edges.length}${types ? ` (${types} type-only)` : ""}`);
    if (showFiles) for (const e of edges.sort()) console.log(`      ${e}`);
  }
  const found = circles(graph);
  if (found.length === 0) console.log(`  no circle between files`);
  for (const scc of found) {
    failed = true;
    console.log(`  CIRCLE: ${scc.map((f) => relative(root, f)).join(" <-> ")}`);
  }
}
process.exit(failed ? 1 : 0);
