#!/usr/bin/env node
// Makes the V8 code cache envd loads its rest bundle with (src/envd/load-rest.ts), run by the
// Node that will run envd: V8 takes a cache only from its own version and under the same flags.
//   node scripts/code-cache.mjs BUNDLE CACHE_OUT [WRAPPED_OUT]
// The bundle is compiled wrapped as a CommonJS module function, as load-rest.ts compiles it,
// under the V8 flags envd runs with while it loads the rest (src/envd/startup-flags.ts);
// WRAPPED_OUT, if given, receives the wrapped source (the single executable's asset).
import { readFileSync, writeFileSync } from "node:fs";
import { setFlagsFromString } from "node:v8";
import { Script } from "node:vm";

const [bundle, cacheOut, wrappedOut] = process.argv.slice(2);
if (!bundle || !cacheOut) {
  process.stderr.write("usage: code-cache.mjs BUNDLE CACHE_OUT [WRAPPED_OUT]\n");
  process.exit(2);
}
// The same text as wrapCommonJs() in src/envd/load-rest.ts.
const wrapped = `(function (exports, require, module, __filename, __dirname) {${readFileSync(bundle, "utf8")}\n})`;
for (const flag of ["--no-turbofan", "--no-maglev", "--no-sparkplug", "--semi-space-growth-factor=1"]) setFlagsFromString(flag);
writeFileSync(cacheOut, new Script(wrapped, { filename: bundle }).createCachedData());
if (wrappedOut) writeFileSync(wrappedOut, wrapped);
