/**
 * Scenario 15: a template built from a registry image (the debootstrapped base as a one-layer
 * image, ~110 MiB compressed) on a loopback registry: sandboxd's pull and unpack beside `skopeo
 * copy` + `umoci unpack` of the same image by hand with the same flags, in the same run; then
 * rebuilds with the image cached (a changed step, and every step cached).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { MAPPED_RANGE, MAPPED_ROOT } from "../../src/sandboxd/host/idmap.js";
import { cachedBaseRootfs } from "../../src/sandboxd/images/base.js";
import { api } from "../../test/sandboxd/helpers/api-client.js";
import { fixtureLayout } from "../../test/sandboxd/helpers/oci-fixtures.js";
import { push, registrySkipReason, startRegistry } from "../../test/sandboxd/helpers/registry.js";
import { startSandboxd, type Sandboxd } from "../../test/sandboxd/helpers/sandboxd.js";
import { waitForBuild } from "../../test/sandboxd/helpers/templates.js";
import { NotAvailable, needSandboxes } from "../lib/available.js";
import { compared, single } from "../lib/rows.js";
import { percentile } from "../lib/stats.js";
import type { BenchContext, Row, Scenario } from "../lib/types.js";

const ID = "15-image-pull";
const CACHE_DIR = process.env.SANDBOXD_CACHE_DIR ?? "/var/cache/sandboxd";
const CIDR = "198.19.216.0/24";

/** A v1 Dockerfile build: ms from the request to ready, to the log line that ends the pull, and from the start of flattening to ready. */
async function timedBuild(s: Sandboxd, ca: Buffer, alias: string, dockerfile: string): Promise<{ ms: number; pullMs?: number; flattenMs?: number; cached: number }> {
  const t0 = Date.now();
  const r = await api(s, ca, "POST", "/templates", { body: { dockerfile, alias, memoryMB: 512 } });
  if (r.status !== 202) throw new Error(`build request answered ${r.status}: ${r.body}`);
  const done = await waitForBuild(s, ca, r.json.templateID, r.json.buildID);
  if (done.last.status !== "ready") throw new Error(`build failed: ${done.last.reason?.message}`);
  const t1 = Date.now();
  const unpacked = done.logs.find((l) => /^unpacked \d+ layer/.test(l.message));
  const flattening = done.logs.find((l) => l.message.startsWith("finalize: "));
  return { ms: t1 - t0, pullMs: unpacked ? Date.parse(unpacked.timestamp) - t0 : undefined, flattenMs: flattening ? t1 - Date.parse(flattening.timestamp) : undefined, cached: done.logs.filter((l) => l.message.startsWith("CACHED")).length };
}

/** `skopeo copy` to a fresh OCI layout and `umoci raw unpack` with sandboxd's id map, as sandboxd runs them; ms. */
function byHand(ref: string, tmp: string): number {
  const dir = mkdtempSync(join(tmp, "by-hand-"));
  const map = `0:${MAPPED_ROOT}:${MAPPED_RANGE}`;
  try {
    const t0 = performance.now();
    execFileSync("skopeo", ["copy", "-q", "--src-tls-verify=false", "--src-no-creds", `docker://${ref}`, `oci:${join(dir, "layout")}:img`], { stdio: "ignore" });
    execFileSync("umoci", ["--log", "error", "raw", "unpack", "--uid-map", map, "--gid-map", map, "--image", `${join(dir, "layout")}:img`, join(dir, "rootfs")], { stdio: "ignore" });
    return performance.now() - t0;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Scenario 15 (see the file's opening comment). */
export const imagePull: Scenario = {
  id: ID,
  title: "sandboxd: template from a ~110 MiB registry image (pull + unpack) vs skopeo copy + umoci unpack by hand; rebuilds with the image cached",
  async run(ctx: BenchContext): Promise<Row[]> {
    needSandboxes(ctx);
    const skip = registrySkipReason();
    if (skip) throw new NotAvailable(skip);
    const base = cachedBaseRootfs(CACHE_DIR);
    if (!base) throw new NotAvailable("the base rootfs is not built yet (start sandboxd once)");
    const rounds = ctx.quick ? 1 : 3;
    const reg = await startRegistry();
    try {
      const layout = await fixtureLayout(CACHE_DIR, base);
      const ref = `${reg.host}/bench/debian:1`;
      push(layout, "debian", ref);
      const size = Number(execFileSync("skopeo", ["inspect", "--tls-verify=false", "--raw", `docker://${ref}`], { encoding: "utf8" }).match(/"size":\s*(\d+)\s*}\s*\]/)?.[1] ?? 0);
      // the registry's files into the page cache for both sides alike
      byHand(ref, ctx.tmp);
      const hand: number[] = [];
      const pulls: number[] = [];
      const builds: number[] = [];
      const changed: number[] = [];
      const flattens: number[] = [];
      const cached: number[] = [];
      for (let i = 0; i < rounds; i++) {
        hand.push(byHand(ref, ctx.tmp));
        // a fresh sandboxd each round: its image cache starts empty
        const s = await startSandboxd({ args: ["--network-cidr", CIDR, "--insecure-registry", reg.host] });
        try {
          const ca = readFileSync(s.caFile);
          const first = await timedBuild(s, ca, "bench-pull", `FROM ${ref}\nRUN echo first > /tmp/step\n`);
          if (first.pullMs === undefined) throw new Error("the first build did not pull");
          pulls.push(first.pullMs);
          builds.push(first.ms);
          const again = await timedBuild(s, ca, "bench-pull", `FROM ${ref}\nRUN echo changed-${i} > /tmp/step\n`);
          if (again.pullMs !== undefined) throw new Error("the rebuild pulled again");
          changed.push(again.ms);
          if (again.flattenMs !== undefined) flattens.push(again.flattenMs);
          const same = await timedBuild(s, ca, "bench-pull", `FROM ${ref}\nRUN echo changed-${i} > /tmp/step\n`);
          if (same.cached < 2) throw new Error(`the fully cached rebuild used ${same.cached} cached steps`);
          cached.push(same.ms);
        } finally {
          await s.stop();
        }
      }
      const note = `image ${(size / 2 ** 20).toFixed(0)} MiB compressed, one layer; loopback registry, plain HTTP`;
      return [
        compared({
          scenario: ID, metric: `pull + unpack in a template build (request → "unpacked"), p50 (${rounds})`, value: percentile(pulls, 50), unit: "ms",
          baseline: percentile(hand, 50), baselineLabel: "skopeo copy + umoci unpack by hand", note,
          target: { text: "≤ 1.2×", met: (r) => r.ratio <= 1.2 },
        }),
        single(ID, `whole first build (pull, user layer, one RUN, flatten), p50 (${rounds})`, percentile(builds, 50), "ms"),
        single(ID, `rebuild, image cached, one changed RUN step, p50 (${rounds})`, percentile(changed, 50), "ms", { text: "≤ 2000 ms", met: percentile(changed, 50) <= 2000 },
          flattens.length ? `of which finalize (publishing the layer stack): ${percentile(flattens, 50).toFixed(0)} ms` : undefined),
        single(ID, `rebuild, image and every step cached, p50 (${rounds})`, percentile(cached, 50), "ms", { text: "≤ 2000 ms", met: percentile(cached, 50) <= 2000 }),
      ];
    } finally {
      await reg.stop();
    }
  },
};
