import { test } from "node:test";
import assert from "node:assert/strict";
import { stat } from "node:fs";
import type { ProcessEvent } from "../../../src/envd/gen/process/process_pb.js";
import { EXIT_DRAIN_BYTES, EXIT_GRACE_MS, ProcessHandle } from "../../../src/envd/process/handle.js";

function handleWithOneOutput(): ProcessHandle {
  const h = new ProcessHandle({ $typeName: "process.ProcessConfig", cmd: "x", args: [], envs: {} }, undefined, false);
  h.attach({ pid: 1, pause() {}, resume() {}, release() {} }, 1);
  return h;
}

async function drain(sub: AsyncIterableIterator<ProcessEvent>): Promise<{ stdout: string; ended: boolean }> {
  let stdout = "";
  let ended = false;
  for await (const ev of sub) {
    const e = ev.event;
    if (e.case === "data" && e.value.output.case === "stdout") stdout += Buffer.from(e.value.output.value).toString();
    if (e.case === "end") ended = true;
  }
  return { stdout, ended };
}

function busyWait(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // a daemon too busy to get back to its event loop
  }
}

test("an expired exit grace does not cut output that was waiting to be read behind a long turn", async () => {
  const h = handleWithOneOutput();
  const sub = h.output.subscribe();
  const result = drain(sub);
  // Run in the check phase, so the next iteration starts with its timers, then polls for I/O:
  // the order in which a blocked daemon meets an expired grace and a readable pipe.
  await new Promise<void>((resolve) =>
    setImmediate(() => {
      h.exited({ code: 0, signal: null });
      // The process's last output, delivered by an I/O completion (as a pipe read would be).
      stat("/", () => {
        const bytes = Buffer.from("last words\n");
        h.arrived(bytes.length);
        h.data("stdout", bytes, 1 << 16);
        h.eof();
      });
      busyWait(EXIT_GRACE_MS + 150);
      resolve();
    }),
  );
  const { stdout, ended } = await result;
  assert.equal(ended, true);
  assert.equal(stdout, "last words\n", "output that was already there when the grace expired is delivered");
});

test("a grandchild holding the pipes quietly: the end event comes after the grace", async () => {
  const h = handleWithOneOutput();
  const result = drain(h.output.subscribe());
  const t0 = Date.now();
  h.exited({ code: 0, signal: null });
  const { ended } = await result;
  const ms = Date.now() - t0;
  assert.equal(ended, true);
  assert.ok(ms >= EXIT_GRACE_MS - 5 && ms < EXIT_GRACE_MS + 2000, `end after ${ms} ms`);
});

test("a grandchild writing flat out cannot hold the end event: output in every poll stops counting after the drain budget", async () => {
  const h = handleWithOneOutput();
  const sub = h.output.subscribe();
  const t0 = Date.now();
  h.exited({ code: 0, signal: null });
  const chunk = Buffer.alloc(64 * 1024, 120);
  let written = 0;
  let stop = false;
  const write = (): void => {
    if (stop) return;
    h.arrived(chunk.length);
    h.data("stdout", chunk, 1 << 20);
    written += chunk.length;
    setImmediate(write);
  };
  setImmediate(write);
  let received = 0;
  let ended = false;
  for await (const ev of sub) {
    if (ev.event.case === "data") received += ev.event.value.output.value?.byteLength ?? 0;
    if (ev.event.case === "end") ended = true;
  }
  stop = true;
  const ms = Date.now() - t0;
  assert.equal(ended, true);
  assert.ok(ms < EXIT_GRACE_MS + 3000, `the end came ${ms} ms after the exit`);
  assert.ok(written > EXIT_DRAIN_BYTES, "output kept flowing in every turn");
  assert.ok(received <= written);
});
