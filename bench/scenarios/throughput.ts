import type { Client } from "@connectrpc/connect";
import type { Process } from "../../src/envd/gen/process/process_pb.js";
import { withDaemon } from "../lib/daemon.js";
import { startRawServer } from "../lib/files-http.js";
import { socketCount } from "../lib/socket-http.js";
import { benchTransports } from "../lib/transports.js";
import { cpuSeconds, peakGrowth } from "../lib/procfs.js";
import { startToEnd } from "../lib/process-stream.js";
import { localPipeFresh } from "../lib/local-pipe.js";
import { leanStartSocket } from "../lib/connect-reader.js";
import { readBase64Ceiling, startBase64Ceiling } from "../lib/base64-ceiling.js";
import { compared } from "../lib/rows.js";
import { median, mib, mibps, timed } from "../lib/stats.js";
import type { BenchContext, Row, Scenario } from "../lib/types.js";

const ID = "2-throughput";

interface Run {
  rate: number;
  cpu: number;
  growth: number;
  /** CPU seconds the bench's own client spent. */
  client: number;
}

/** Scenario 2: `head -c 1G /dev/zero` streamed through Start, binary and JSON, against a local pipe read. */
export const throughput: Scenario = {
  id: ID,
  title: "Output throughput: head -c <size> /dev/zero through Start",
  async run(ctx: BenchContext): Promise<Row[]> {
    const size = ctx.sizeBytes ?? (ctx.quick ? 16 * 2 ** 20 : 2 ** 30);
    const reps = ctx.quick ? 1 : 3;
    const args = ["-c", String(size), "/dev/zero"];
    return withDaemon(async ({ daemon }) => {
      const c = benchTransports(daemon.url);
      const once = async (client: Client<typeof Process>) => {
        const cpu0 = cpuSeconds(daemon.pid);
        const own0 = process.cpuUsage();
        const { growth, value: t } = await peakGrowth(daemon.pid, () => timed(() => startToEnd(client, "/usr/bin/head", args)));
        if (t.value.bytes !== size) throw new Error(`Start delivered ${t.value.bytes} of ${size} bytes`);
        const own = process.cpuUsage(own0);
        return { rate: mibps(size, t.ms), cpu: cpuSeconds(daemon.pid) - cpu0, growth, client: (own.user + own.system) / 1e6 };
      };
      const lean = async (binary: boolean) => {
        const cpu0 = cpuSeconds(daemon.pid);
        const { growth, value: t } = await peakGrowth(daemon.pid, () => timed(() => leanStartSocket(daemon.url, "/usr/bin/head", args, binary)));
        if (t.value.bytes !== size || t.value.exitCode !== 0) throw new Error(`lean Start delivered ${t.value.bytes} of ${size} bytes, exit ${t.value.exitCode}`);
        return { rate: mibps(size, t.ms), cpu: cpuSeconds(daemon.pid) - cpu0, growth, client: t.value.clientCpu };
      };
      const local = async () => {
        const { ms, bytes } = await localPipeFresh("/usr/bin/head", args);
        if (bytes !== size) throw new Error(`local pipe read ${bytes} of ${size} bytes`);
        return mibps(size, ms);
      };
      const raw = await startRawServer();
      const b64 = await startBase64Ceiling();
      const viaBase64 = async () => {
        const { ms, value } = await timed(() => readBase64Ceiling(b64.url, size));
        if (value !== size) throw new Error(`base64 ceiling delivered ${value} of ${size} bytes`);
        return mibps(size, ms);
      };
      const rawCpu: number[] = [];
      const viaHttp = async () => {
        const cpu0 = cpuSeconds(raw.proc.pid!);
        const { ms, value } = await timed(() => socketCount(`${raw.url}/exec?size=${size}`));
        if (value !== size) throw new Error(`raw HTTP stream delivered ${value} of ${size} bytes`);
        rawCpu.push(cpuSeconds(raw.proc.pid!) - cpu0);
        return mibps(size, ms);
      };
      const base: number[] = [];
      const http: number[] = [];
      const text: number[] = [];
      const bin: Run[] = [];
      const json: Run[] = [];
      const gz: Run[] = [];
      const leanBin: Run[] = [];
      const leanJson: Run[] = [];
      // A slow daemon must not blow the run's time budget: stop repeating after 2 minutes.
      const t0 = Date.now();
      try {
        for (let i = 0; i < reps && (i === 0 || Date.now() - t0 < 120_000); i++) {
          base.push(await local());
          bin.push(await once(c.proc.binary));
          json.push(await once(c.proc.json));
          gz.push(await once(c.proc.binaryGzip));
          leanBin.push(await lean(true));
          leanJson.push(await lean(false));
          http.push(await viaHttp());
          text.push(await viaBase64());
          ctx.log(`rep ${i + 1}: local ${base[i].toFixed(0)} MiB/s, raw HTTP ${http[i].toFixed(0)}, base64 HTTP ${text[i].toFixed(0)}, binary ${bin[i].rate.toFixed(0)}, json ${json[i].rate.toFixed(0)}, binary+gzip ${gz[i].rate.toFixed(0)}, lean binary ${leanBin[i].rate.toFixed(0)}, lean json ${leanJson[i].rate.toFixed(0)}`);
        }
      } finally {
        await raw.stop();
        await b64.stop();
      }
      const gib = size / 2 ** 30;
      const mk = (metric: string, xs: Run[], min?: number) =>
        compared({
          scenario: ID,
          metric,
          value: median(xs.map((x) => x.rate)),
          unit: "MiB/s",
          baseline: median(base),
          baselineLabel: "local pipe read",
          target: min === undefined ? undefined : { text: `≥ ${min}×`, met: (r) => r.ratio >= min },
          note:
            `daemon CPU ${(median(xs.map((x) => x.cpu)) / gib).toFixed(2)} s per GiB, client CPU ${(median(xs.map((x) => x.client)) / gib).toFixed(2)} s per GiB, ` +
            `peak RSS growth ${mib(Math.max(...xs.map((x) => x.growth))).toFixed(0)} MiB; ` +
            `${(size / 2 ** 20).toFixed(0)} MiB per run, ${xs.length} run(s)`,
        });
      return [
        // Gated: a lean reader that decodes every frame, so the daemon (not the client) sets the pace.
        mk("Start stdout, binary HTTP/1.1, lean Connect reader", leanBin, 0.5),
        mk("Start stdout, JSON HTTP/1.1, lean Connect reader", leanJson, 0.25),
        // The same through connect-node + protobuf-es: the client's own CPU (see note) shares the 2 cores.
        mk("Start stdout, Connect binary h2c, connect-node client (info)", bin),
        mk("Start stdout, Connect JSON HTTP/1.1, connect-node client (info)", json),
        mk("Start stdout, binary h2c, client accepts gzip (info)", gz),
        compared({
          scenario: ID,
          metric: "minimal Node HTTP server piping the same command (reference)",
          value: median(http),
          unit: "MiB/s",
          baseline: median(base),
          baselineLabel: "local pipe read",
          note: `a straightforward Node server (Node's pipe reads, chunked HTTP/1.1), read by the same socket client; server CPU ${(median(rawCpu) / gib).toFixed(2)} s per GiB`,
        }),
        compared({
          scenario: ID,
          metric: "minimal Node HTTP server piping the same command as base64 text (reference)",
          value: median(text),
          unit: "MiB/s",
          baseline: median(base),
          baselineLabel: "local pipe read",
          note: "base64 encoded in the server by Node, decoded in the client by Node: the text cost any JSON transport of bytes pays, done plainly",
        }),
      ];
    });
  },
};
