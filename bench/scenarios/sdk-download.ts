import { randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import http from "node:http";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { withDaemon } from "../lib/daemon.js";
import { compared } from "../lib/rows.js";
import { median, mibps, timed } from "../lib/stats.js";
import type { BenchContext, Row, Scenario } from "../lib/types.js";

const ID = "9-sdk-download";

/** Log-like text: compressible, but not trivially (numbers and paths vary line to line). */
function text(bytes: number): Buffer {
  const parts: string[] = [];
  for (let n = 0, len = 0; len < bytes; n++) {
    const line = `${new Date(1_700_000_000_000 + n * 997).toISOString()} level=${n % 7 ? "info" : "warn"} path=/home/user/data/f${(n * 31) % 1009}.csv rows=${(n * 7919) % 100_000} took=${(n * 13) % 977}ms\n`;
    parts.push(line);
    len += line.length;
  }
  return Buffer.from(parts.join("")).subarray(0, bytes);
}

/** Reads a whole body as fetch (and so both SDKs' files.read) does: undici negotiates gzip and decodes it. */
async function fetchAll(url: string, headers: Record<string, string>): Promise<number> {
  const res = await fetch(url, { headers });
  if (res.status !== 200) throw new Error(`GET /files: HTTP ${res.status}`);
  let n = 0;
  for await (const chunk of res.body!) n += (chunk as Uint8Array).byteLength;
  return n;
}

/** Bytes on the wire of a gzip-negotiated download (the encoded body, not decoded). */
function wireBytes(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http.get(url, { agent: false, headers: { "accept-encoding": "gzip" } }, (res) => {
      let n = 0;
      res.on("data", (c: Buffer) => (n += c.length));
      res.on("end", () => resolve(n));
      res.on("error", reject);
    }).on("error", reject);
  });
}

/**
 * The client's floor: a bare Node server answering with the same bytes as a ready-made stored
 * gzip body (no compression work at all). fetch of it beside envd's identity rate is what any
 * server can reach on the SDK's path, bounded by fetch's own gunzip.
 */
async function floorServer(data: Buffer): Promise<{ url: string; close(): void }> {
  const body = gzipSync(data, { level: 0 });
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { "content-encoding": "gzip", "content-length": body.length });
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/`, close: () => server.close() };
}

/**
 * Runs each transfer `reps` times in rotation, each kind starting a round in turn: a transfer
 * leaves the client 64 MiB of buffers to collect, which should not always fall on the same kind.
 */
async function rotated(size: number, reps: number, kinds: Record<string, () => Promise<number>>): Promise<Record<string, number>> {
  const names = Object.keys(kinds);
  const rates: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  for (let i = 0; i < reps; i++) {
    for (let j = 0; j < names.length; j++) {
      const name = names[(i + j) % names.length];
      rates[name].push(mibps(size, (await timed(kinds[name])).ms));
    }
  }
  return Object.fromEntries(names.map((n) => [n, median(rates[n])]));
}

/** Scenario 9: downloads the way the SDK asks for them (gzip negotiated) beside identity of the same file. */
export const sdkDownload: Scenario = {
  id: ID,
  title: "SDK-style download: GET /files with gzip negotiated (fetch's default) vs identity of the same file",
  async run(ctx: BenchContext): Promise<Row[]> {
    const size = ctx.sizeBytes ?? (ctx.quick ? 8 * 2 ** 20 : 64 * 2 ** 20);
    const reps = ctx.quick ? 1 : 3;
    const files = {
      random: randomBytes(size),
      text: text(size),
      mixed: Buffer.concat([text(size / 4), randomBytes(size / 4), text(size / 4), randomBytes(size / 4)]),
    };
    for (const [name, data] of Object.entries(files)) await writeFile(join(ctx.tmp, `${name}.dat`), data);
    return withDaemon(async ({ daemon }) => {
      const rows: Row[] = [];
      for (const [name, data] of Object.entries(files)) {
        const url = `${daemon.url}/files?path=${encodeURIComponent(join(ctx.tmp, `${name}.dat`))}&username=root`;
        const floor = name === "random" ? await floorServer(data) : undefined;
        let rate: Record<string, number>;
        try {
          rate = await rotated(size, reps, {
            // fetch adds `accept-encoding: gzip, deflate` itself when the request names none.
            gz: () => fetchAll(url, {}),
            id: () => fetchAll(url, { "accept-encoding": "identity" }),
            ...(floor ? { floor: () => fetchAll(floor.url, {}) } : {}),
          });
        } finally {
          floor?.close();
        }
        const target = name === "random" ? { text: "≥ 0.5×", met: (r: { ratio: number }) => r.ratio >= 0.5 } : undefined;
        rows.push(compared({
          scenario: ID, metric: `${name}: gzip negotiated, decoded by fetch`, value: rate.gz, unit: "MiB/s",
          baseline: rate.id, baselineLabel: "identity, same file", target, note: `${(size / 2 ** 20).toFixed(0)} MiB, ${reps} run(s) of each, in rotation`,
        }));
        if (floor) {
          rows.push(compared({
            scenario: ID, metric: "random: client floor, fetch of a ready stored-gzip body from a bare Node server (reference)", value: rate.floor,
            unit: "MiB/s", baseline: rate.id, baselineLabel: "envd identity, same file",
          }));
        }
        const wire = await wireBytes(url);
        const level6 = gzipSync(data, { level: 6 }).length;
        rows.push(compared({
          scenario: ID, metric: `${name}: bytes on the wire`, value: wire / 2 ** 20, unit: "MiB", baseline: level6 / 2 ** 20,
          baselineLabel: "gzip level 6 of the file", target: name === "text" ? { text: "≤ 1.15×", met: (r) => r.ratio <= 1.15 } : undefined,
        }));
      }
      return rows;
    });
  },
};
