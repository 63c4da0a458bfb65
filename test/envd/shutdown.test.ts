import { test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import { startDaemon } from "./helpers/daemon.js";
import { clients } from "./helpers/clients.js";

for (const kind of ["json", "binary"] as const) {
  test(`SIGTERM ends an open ${kind} stream with a clean end-of-stream and exits within 5 s`, async () => {
    const d = await startDaemon();
    try {
      const c = clients(d.url);
      const stream = c.proc[kind].start({ process: { cmd: "/bin/sleep", args: ["30"] } });
      const it = stream[Symbol.asyncIterator]();
      const first = await it.next();
      assert.equal(first.value?.event?.event.case, "start");
      const watch = c.fs[kind].watchDir({ path: "/tmp" });
      const wit = watch[Symbol.asyncIterator]();
      assert.equal((await wit.next()).value?.event.case, "start");
      const t0 = Date.now();
      d.proc.kill("SIGTERM");
      // Both streams end with a proper end-of-stream frame that says why (not a cut connection).
      const drain = async (next: () => Promise<IteratorResult<unknown>>) => {
        try {
          while (!(await next()).done);
          return undefined;
        } catch (err) {
          return err;
        }
      };
      for (const err of [await drain(() => it.next()), await drain(() => wit.next())]) {
        assert.ok(err instanceof ConnectError, String(err));
        assert.equal(err.code, Code.Unavailable);
        assert.match(err.message, /envd is shutting down/);
      }
      const code = await d.stop();
      assert.equal(code, 0);
      assert.ok(Date.now() - t0 < 5000, `exit took ${Date.now() - t0} ms`);
    } finally {
      await d.stop();
    }
  });
}

test("idle keep-alive connections do not delay shutdown", async () => {
  const d = await startDaemon();
  const r = await fetch(`${d.url}/filesystem.Filesystem/Stat`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  assert.equal(r.status, 200);
  await r.text();
  const t0 = Date.now();
  assert.equal(await d.stop(), 0);
  assert.ok(Date.now() - t0 < 1500, `stop took ${Date.now() - t0} ms`);
});

test("dozens of open streams, all linked to the shutdown signal, raise no listener-leak warning", async () => {
  const d = await startDaemon();
  try {
    const c = clients(d.url);
    const controller = new AbortController();
    const its = Array.from({ length: 30 }, () => c.proc.binary.start({ process: { cmd: "/bin/sleep", args: ["30"] } }, { signal: controller.signal })[Symbol.asyncIterator]());
    for (const it of its) assert.equal((await it.next()).value?.event?.event.case, "start");
    controller.abort();
    await Promise.all(its.map((it) => it.next().catch(() => undefined)));
    await new Promise((r) => setTimeout(r, 200));
    assert.doesNotMatch(d.logs(), /MaxListenersExceeded/);
  } finally {
    await d.stop();
  }
});
