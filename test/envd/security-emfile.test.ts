// Descriptor exhaustion costs connections, never the daemon: started with 64 descriptors and
// flooded with connections until accepts fail (EMFILE), envd refuses what it cannot take,
// keeps its timers and listener alive, and serves /health again once the flood is gone.
import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { startDaemon } from "./helpers/daemon.js";
import { procStats, sleep } from "./helpers/fuzz.js";

const LIMIT = 64;

test("with every descriptor taken the daemon survives, and serves again once they are free", async () => {
  const d = await startDaemon({ prefix: ["prlimit", `--nofile=${LIMIT}`] });
  const sockets: net.Socket[] = [];
  try {
    const open = () =>
      new Promise<void>((resolve) => {
        const s = net.connect(d.port, "127.0.0.1", () => resolve());
        s.on("error", () => resolve());
        sockets.push(s);
      });
    // Twice the limit: the daemon's table fills, later accepts fail.
    for (let i = 0; i < LIMIT * 2; i++) await open();
    const full = procStats(d.pid).fds;
    assert.ok(full >= LIMIT - 2, `the daemon's descriptors are exhausted (${full} of ${LIMIT})`);
    // Two seconds with the table full: the memory check (once a second) and every accept fail.
    const during = await fetch(`${d.url}/health`, { signal: AbortSignal.timeout(2000) }).then(
      (r) => r.status,
      () => "refused",
    );
    await sleep(2000);
    assert.equal(d.proc.exitCode, null, `the daemon exited while exhausted (answer then: ${during})\n${d.logs().slice(-1500)}`);
    assert.equal(d.proc.signalCode, null);
    for (const s of sockets) s.destroy();
    sockets.length = 0;
    let status: number | string = "none";
    for (let i = 0; i < 50 && status !== 204; i++) {
      status = await fetch(`${d.url}/health`, { signal: AbortSignal.timeout(2000) }).then(
        (r) => r.status,
        (e: Error) => e.name,
      );
      if (status !== 204) await sleep(100);
    }
    assert.equal(status, 204, "/health once the connections are gone");
    assert.equal(d.proc.exitCode, null);
    assert.doesNotMatch(d.logs(), /uncaught|EMFILE: too many open files, uv_/i);
  } finally {
    for (const s of sockets) s.destroy();
    await d.stop();
  }
});
