import type { Client } from "@connectrpc/connect";
import { join } from "node:path";
import type { Filesystem } from "../../src/envd/gen/filesystem/filesystem_pb.js";
import { probe } from "../lib/available.js";
import { withDaemon } from "../lib/daemon.js";
import { compared } from "../lib/rows.js";
import { interleave, median } from "../lib/stats.js";
import { fanFor, makeFlat, makeTree, readdirLstat } from "../lib/tree.js";
import { benchTransports } from "../lib/transports.js";
import type { BenchContext, Row, Scenario } from "../lib/types.js";

const ID = "4-listing";
const TARGET = { text: "≤ 2×", met: (r: { ratio: number }) => r.ratio <= 2 };

/** Scenario 4: ListDir of a flat 10k directory (depth 1) and a 100k tree (depth 3) vs readdir + lstat. */
export const listing: Scenario = {
  id: ID,
  title: "Listing: ListDir vs in-process readdir + lstat",
  async run(ctx: BenchContext): Promise<Row[]> {
    const flatN = ctx.quick ? 500 : 10_000;
    const fan = fanFor(ctx.quick ? 2_000 : 100_000);
    const flat = join(ctx.tmp, "flat");
    const tree = join(ctx.tmp, "tree");
    makeFlat(flat, flatN);
    const treeN = makeTree(tree, fan);
    const reps = ctx.quick ? 1 : 5;
    return withDaemon(async ({ daemon }) => {
      const t = benchTransports(daemon.url);
      const rows: Row[] = [];
      const list = async (client: Client<typeof Filesystem>, path: string, depth: number, expect: number) => {
        const res = await probe("Filesystem.ListDir", () => client.listDir({ path, depth }));
        if (res.entries.length !== expect) throw new Error(`ListDir ${path} gave ${res.entries.length} entries, expected ${expect}`);
      };
      const cases = [
        { label: `${flatN} entries, depth 1`, path: flat, depth: 1, n: flatN },
        { label: `${treeN} entries, depth 3`, path: tree, depth: 3, n: treeN },
      ];
      for (const c of cases) {
        for (const [codec, client] of [
          ["binary h2c", t.fs.binary],
          ["JSON HTTP/1.1", t.fs.json],
        ] as const) {
          const r = await interleave(reps, 1, () => list(client, c.path, c.depth, c.n), () => readdirLstat(c.path, c.depth));
          ctx.log(`${c.label} ${codec}: ${median(r.a).toFixed(1)} ms vs ${median(r.b).toFixed(1)} ms`);
          rows.push(
            compared({
              scenario: ID,
              metric: `ListDir ${c.label}, ${codec}`,
              value: median(r.a),
              unit: "ms",
              baseline: median(r.b),
              baselineLabel: "readdir + lstat",
              target: TARGET,
            }),
          );
        }
      }
      return rows;
    });
  },
};
