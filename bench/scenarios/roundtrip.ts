import http from "node:http";
import { sdkSandbox } from "../../test/envd/helpers/clients.js";
import { directLine, execLine, findExecTools, nativeLine } from "../../src/envd/process/wrapper.js";
import { nativeSupported } from "../../src/envd/process/spawner.js";
import { UserDb } from "../../src/envd/auth/users.js";
import { withDaemon } from "../lib/daemon.js";
import { benchTransports } from "../lib/transports.js";
import { localRun, startToEnd } from "../lib/process-stream.js";
import { leanStart } from "../lib/connect-reader.js";
import { compared } from "../lib/rows.js";
import { memStatus } from "../lib/procfs.js";
import { startSpawnServer } from "../lib/spawn-server.js";
import { startConnectFloor } from "../lib/connect-floor.js";
import { startCannedStart } from "../lib/canned-start.js";
import { interleave, median, mib, percentile } from "../lib/stats.js";
import type { BenchContext, Row, Scenario } from "../lib/types.js";

const ID = "1-roundtrip";
const TARGET = {
  text: "≤ 1.5× and ≤ +1 ms (p50)",
  met: (r: { value: number; baseline: number; ratio: number }) => r.ratio <= 1.5 && r.value - r.baseline <= 1,
};

function row(metric: string, a: number[], b: number[], label: string, withTarget = true): Row {
  return compared({
    scenario: ID,
    metric,
    value: median(a),
    unit: "ms",
    baseline: median(b),
    baselineLabel: label,
    target: withTarget ? TARGET : undefined,
    note: `p99 ${percentile(a, 99).toFixed(2)} ms vs ${percentile(b, 99).toFixed(2)} ms`,
  });
}

/**
 * A client-floor row: the client against the canned server, beside the spawn baseline, with the
 * client's own CPU time per call (this process's, measured over back-to-back calls).
 */
function clientFloor(label: string, f: { a: number[]; b: number[] }, baselineLabel: string, viaEnvd: number, cpuMs: number): Row {
  const r = row(`client floor: ${label}, Start answered at once with canned events, no process (reference)`, f.a, f.b, baselineLabel, false);
  const share = viaEnvd - median(f.a);
  r.note += `; client CPU ${cpuMs.toFixed(2)} ms per call; envd's row is ${share.toFixed(2)} ms above this floor (daemon, spawn and command) against the baseline's ${median(f.b).toFixed(2)} ms`;
  return r;
}

/** This process's CPU time (user + system) per call of `call`, over `n` sequential calls. */
async function cpuPerCall(n: number, call: () => Promise<unknown>): Promise<number> {
  const before = process.cpuUsage();
  for (let i = 0; i < n; i++) await call();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000 / n;
}

/** One lean Start of /bin/true, checked to have exited 0. */
async function leanTrue(url: string, binary: boolean): Promise<void> {
  const r = await leanStart(url, "/bin/true", [], binary);
  if (r.exitCode !== 0) throw new Error(`/bin/true exited ${r.exitCode}`);
}

/** Scenario 1: Start /bin/true → end over Connect binary (h2c), JSON (HTTP/1.1) and the e2b SDK. */
export const roundtrip: Scenario = {
  id: ID,
  title: "Command round trip: Start /bin/true → end event",
  async run(ctx: BenchContext): Promise<Row[]> {
    const n = ctx.quick ? 8 : 200;
    const warm = ctx.quick ? 2 : 10;
    const spawnTrue = () => localRun("/bin/true", []);
    return withDaemon(async ({ daemon }) => {
      const c = benchTransports(daemon.url);
      const rows: Row[] = [];
      const bin = await interleave(n, warm, () => startToEnd(c.proc.binary, "/bin/true", []), spawnTrue);
      rows.push(row("Start /bin/true, Connect binary h2c", bin.a, bin.b, "spawn /bin/true"));
      // fork() copies the parent's page tables, so a spawn from a bigger process costs more.
      rows[0].note += `; daemon RSS ${mib(memStatus(daemon.pid).rss).toFixed(0)} MiB, bench RSS ${mib(process.memoryUsage().rss).toFixed(0)} MiB`;
      ctx.log(`binary p50 ${median(bin.a).toFixed(2)} ms`);
      const json = await interleave(n, warm, () => startToEnd(c.proc.json, "/bin/true", []), spawnTrue);
      rows.push(row("Start /bin/true, Connect JSON HTTP/1.1", json.a, json.b, "spawn /bin/true"));
      // The same round trip with a lean Connect client (hand-made request, frames decoded by the
      // bench; connect-reader.ts): what the daemon adds when the client's own CPU is not in the
      // measurement, as with a remote client. connect-node's client costs ~1-2 ms per call here.
      const leanP50: number[] = [];
      for (const binary of [true, false]) {
        const lean = await interleave(n, warm, () => leanTrue(daemon.url, binary), spawnTrue);
        leanP50.push(median(lean.a));
        rows.push(row(`Start /bin/true, lean Connect client, ${binary ? "binary" : "JSON"} HTTP/1.1`, lean.a, lean.b, "spawn /bin/true"));
      }

      const user = new UserDb().lookup("user");
      if (!user) throw new Error("the bench needs the test host's user `user`");
      // The SDK sends `/bin/bash -l -c true` as `user`, so its fair baseline is that command
      // spawned locally as that user with the environment the daemon gives it.
      const asUser = {
        uid: user.uid,
        gid: user.gid,
        cwd: user.home,
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: user.home, USER: user.name, LOGNAME: user.name },
      };
      const sbx = await sdkSandbox(daemon.url);
      const nSdk = ctx.quick ? 4 : 60;
      const sdk = await interleave(nSdk, warm, () => sbx.commands.run("true"), () => localRun("/bin/bash", ["-l", "-c", "true"], asUser));
      rows.push(row("SDK commands.run('true')", sdk.a, sdk.b, "spawn bash -l -c true as user"));

      // The HTTP floor: one keep-alive GET /health round trip, no RPC framework, no process.
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      const health = () =>
        new Promise<void>((resolve, reject) => {
          http.get(`${daemon.url}/health`, { agent }, (res) => res.resume().on("end", resolve)).on("error", reject);
        });
      const h = await interleave(n, warm, health, spawnTrue);
      rows.push(row("GET /health round trip, keep-alive HTTP/1.1 (reference)", h.a, h.b, "spawn /bin/true", false));

      // The floor of a remote command round trip: a bare Node HTTP server (its own process, like
      // the daemon) spawning /bin/true as the daemon does for `user` (session, pipes, uid/gid) and
      // answering at exit + both pipes' EOF. An HTTP round trip plus a spawn in another process,
      // with nothing of envd: what no implementation of this RPC in Node can beat.
      // Twice: with Node's spawn (fork) and with the daemon's own (vfork-like clone, pidfd).
      for (const native of nativeSupported() ? [false, true] : [false]) {
        const floorServer = await startSpawnServer(user.uid, user.gid, native);
        try {
          const viaServer = () =>
            new Promise<void>((resolve, reject) => {
              http.get(`${floorServer.url}/run`, { agent }, (res) => res.resume().on("end", resolve)).on("error", reject);
            });
          const f = await interleave(n, warm, viaServer, spawnTrue);
          const how = native ? "with envd's native spawn" : "with Node's spawn";
          rows.push(row(`GET /run on a bare Node server spawning /bin/true as user ${how}, keep-alive HTTP/1.1 (floor, reference)`, f.a, f.b, "spawn /bin/true", false));
          rows[rows.length - 1].note += `; Connect binary is ${(median(bin.a) - median(f.a)).toFixed(2)} ms above this floor, JSON ${(median(json.a) - median(f.a)).toFixed(2)} ms`;
        } finally {
          await floorServer.stop();
        }
      }
      agent.destroy();

      // The framework floor: the same Start round trip (start and end events, Connect binary
      // h2c, the same client) against a bare connect-node server that only spawns: what the RPC
      // stack the daemon is built on costs, before any envd code runs.
      const connectFloor = await startConnectFloor(user.uid, user.gid);
      try {
        const client = benchTransports(connectFloor.url).proc.binary;
        const cf = await interleave(n, warm, () => startToEnd(client, "/bin/true", []), spawnTrue);
        rows.push(row("Start /bin/true on a bare connect-node server, Connect binary h2c (framework floor, reference)", cf.a, cf.b, "spawn /bin/true", false));
        rows[rows.length - 1].note += `; Connect binary through envd is ${(median(bin.a) - median(cf.a)).toFixed(2)} ms above this floor`;
      } finally {
        await connectFloor.stop();
      }

      // The client floor: every client above against a server that answers Start at once with
      // canned start and end events (no process, no framework): the client's own work plus the
      // loopback exchange. Added to the baseline's spawn, it bounds what any daemon can reach with
      // that client on these cores, since here the client shares them with the daemon.
      const canned = await startCannedStart();
      try {
        const cc = benchTransports(canned.url, canned.http1Url).proc;
        // Each client with its envd row's p50, to show envd's share above the client's floor.
        const clients: [string, () => Promise<unknown>, number][] = [
          ["connect-node client, binary h2c", () => startToEnd(cc.binary, "/bin/true", []), median(bin.a)],
          ["connect-node client, JSON HTTP/1.1", () => startToEnd(cc.json, "/bin/true", []), median(json.a)],
          ["lean Connect client, binary HTTP/1.1", () => leanTrue(canned.http1Url, true), leanP50[0]],
          ["lean Connect client, JSON HTTP/1.1", () => leanTrue(canned.http1Url, false), leanP50[1]],
        ];
        for (const [label, call, viaEnvd] of clients) {
          const f = await interleave(n, warm, call, spawnTrue);
          rows.push(clientFloor(label, f, "spawn /bin/true", viaEnvd, await cpuPerCall(n, call)));
        }
        const cannedSbx = await sdkSandbox(canned.http1Url);
        const sdkCall = () => cannedSbx.commands.run("true");
        const f = await interleave(nSdk, warm, sdkCall, () => localRun("/bin/bash", ["-l", "-c", "true"], asUser));
        rows.push(clientFloor("SDK commands.run('true')", f, "spawn bash -l -c true as user", median(sdk.a), await cpuPerCall(nSdk, sdkCall)));
      } finally {
        await canned.stop();
      }

      // What the daemon executes for this user (one direct exec with the native spawn; without
      // it, the sh → setpriv wrapper chain when groups or priorities need it), spawned here
      // with Node's spawn: the exec floor.
      const tools = findExecTools();
      const direct = nativeSupported() ? nativeLine("/bin/true", [], user, tools) : directLine("/bin/true", [], user, tools);
      const line = direct ?? execLine("/bin/true", [], user, tools);
      const chain = await interleave(n, warm, () => localRun(line.file, line.args, { uid: line.uid, gid: line.gid }), spawnTrue);
      rows.push(row(`local spawn of the daemon's exec line (${direct ? "direct exec as user" : "wrapper chain"}, reference)`, chain.a, chain.b, "spawn /bin/true", false));
      return rows;
    });
  },
};
