// The poller's round spread over a period: requests start one after another (not all at once),
// every sandbox is read once and the round's samples are written together; a sandbox that stops
// running while its round is under way is not reported as an unresponsive envd.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { createJsonLogger } from "../../../src/common/log.js";
import type { EnvdClient } from "../../../src/sandboxd/envd-client/client.js";
import { createEnvdPoller } from "../../../src/sandboxd/metrics/envd-poller.js";
import type { SandboxRow } from "../../../src/sandboxd/store/sandboxes.js";
import type { Store } from "../../../src/sandboxd/store/store.js";
import { useUnitStore } from "../helpers/unit-store.js";

/** A running sandbox row with what the poller reads of it. */
const row = (id: string, ip: string): SandboxRow => ({ id, teamID: "t", state: "running", ip, envdPort: 49983, secure: false }) as unknown as SandboxRow;

describe("a spread round of the envd poller", () => {
  let store: Store;
  useUnitStore("poller-spread-", { ready: (s) => void (store = s), reset: () => undefined });

  test("starts its requests one at a time, reads each sandbox once and writes every sample", async () => {
    const rows = Array.from({ length: 5 }, (_, i) => row(`sb${i}`, `198.18.250.${i + 2}`));
    const started: string[] = [];
    let inflightMax = 0;
    let inflight = 0;
    const connect = (addr: { ip: string }): EnvdClient =>
      ({
        async metrics() {
          started.push(addr.ip);
          inflightMax = Math.max(inflightMax, ++inflight);
          // answered only after the event loop turns, as a real envd answers
          await new Promise((r) => setImmediate(r));
          inflight--;
          return { cpu_count: 2, mem_used: 1 };
        },
        close: () => undefined,
      }) as unknown as EnvdClient;
    const poller = createEnvdPoller({ store, log: createJsonLogger({ level: "silent", fd: 2, name: "test" }), envd: connect, rows: () => rows });
    await poller.poll(50);
    assert.deepEqual(started, rows.map((r) => r.ip), "every sandbox once, in order");
    assert.ok(inflightMax < rows.length, `never all at once (${inflightMax} of ${rows.length} at most)`);
    for (const r of rows) assert.equal(store.sandboxMetrics.latest(r.id)?.cpuCount, 2, `${r.id}'s sample is written`);
    // the same round unspread: every request is out before the first answer
    started.length = 0;
    inflightMax = 0;
    await poller.poll();
    assert.equal(started.length, rows.length);
    assert.equal(inflightMax, rows.length);
    poller.stop();
  });

  test("a sandbox gone while its round runs is dropped quietly, one whose envd fails is reported", async () => {
    const rows = [row("gone", "198.18.250.20"), row("mute", "198.18.250.21")];
    let live = rows;
    const warned: string[] = [];
    const log = createJsonLogger({ level: "silent", fd: 2, name: "test" });
    log.warn = ((obj: { sandboxID?: string }) => void warned.push(obj.sandboxID ?? "")) as typeof log.warn;
    const connect = (addr: { ip: string }): EnvdClient =>
      ({
        async metrics() {
          // the first sandbox is killed while its request is out; the second's envd does not answer
          if (addr.ip === rows[0].ip) live = [rows[1]];
          throw new Error("connect ECONNREFUSED");
        },
        close: () => undefined,
      }) as unknown as EnvdClient;
    const poller = createEnvdPoller({ store, log, envd: connect, rows: () => live });
    await poller.poll();
    assert.deepEqual(warned, ["mute"]);
    assert.equal(poller.health("mute")?.up, false);
    assert.equal(poller.stats().failures, 2);
    poller.stop();
  });
});
