import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import type { Sandbox } from "e2b";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { sdkSandbox } from "../helpers/clients.js";

let d: Daemon;
let sbx: Sandbox;

before(async () => {
  d = await startDaemon();
  sbx = await sdkSandbox(d.url);
});
after(async () => {
  await d?.stop();
});

const enc = new TextEncoder();

/** Collects PTY output as text and lets a test wait for a pattern in it. */
function terminal() {
  const dec = new TextDecoder();
  let text = "";
  const waiters: { re: RegExp; resolve: () => void }[] = [];
  return {
    onData(bytes: Uint8Array) {
      text += dec.decode(bytes, { stream: true });
      for (const w of waiters.splice(0)) {
        if (w.re.test(text)) w.resolve();
        else waiters.push(w);
      }
    },
    get text() {
      return text;
    },
    waitFor(re: RegExp, ms = 10_000): Promise<void> {
      if (re.test(text)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`timed out waiting for ${re} in ${JSON.stringify(text)}`)), ms);
        waiters.push({ re, resolve: () => (clearTimeout(timer), resolve()) });
      });
    },
  };
}

test("pty: create with a size, run commands as the user, resize (tput cols), exit code", async () => {
  const t = terminal();
  const h = await sbx.pty.create({ cols: 80, rows: 24, onData: t.onData, timeoutMs: 30_000 });
  await sbx.pty.sendInput(h.pid, enc.encode("echo size=$(tput cols)x$(tput lines) me=$(whoami)\n"));
  await t.waitFor(/size=80x24 me=user/);
  await sbx.pty.resize(h.pid, { cols: 100, rows: 30 });
  await sbx.pty.sendInput(h.pid, enc.encode("echo cols=$(tput cols)\n"));
  await t.waitFor(/cols=100\r?\n/);
  await sbx.pty.sendInput(h.pid, enc.encode("echo term=$TERM; exit 0\n"));
  const r = await h.wait();
  assert.equal(r.exitCode, 0);
  assert.match(t.text, /term=xterm-256color/);
});

test("pty: kill returns true and ends the handle; unknown pid returns false", async () => {
  const h = await sbx.pty.create({ cols: 80, rows: 24, onData: () => undefined, timeoutMs: 30_000 });
  assert.equal(await sbx.pty.kill(h.pid), true);
  await assert.rejects(h.wait(), (e: Error & { exitCode?: number }) => e.exitCode === -1);
  assert.equal(await sbx.pty.kill(h.pid), false);
  assert.equal(await sbx.pty.kill(999_999), false);
});

test("pty: connect after disconnect delivers new output; background jobs die with kill", async () => {
  const first = terminal();
  const h = await sbx.pty.create({ cols: 80, rows: 24, onData: first.onData, timeoutMs: 30_000 });
  await sbx.pty.sendInput(h.pid, enc.encode("sleep 1000 &\necho started\n"));
  await first.waitFor(/started\r?\n/);
  await h.disconnect();
  const second = terminal();
  const h2 = await sbx.pty.connect(h.pid, { onData: second.onData });
  await sbx.pty.sendInput(h.pid, enc.encode("echo again-$((40+2))\n"));
  await second.waitFor(/again-42/);
  const jobs = await sbx.commands.run(`ps -o pid= -s ${h.pid} | wc -l`, { user: "root" });
  assert.ok(Number(jobs.stdout.trim()) >= 2, "the shell and its background job share the session");
  assert.equal(await sbx.pty.kill(h.pid), true);
  await assert.rejects(h2.wait());
  let left = "";
  for (let i = 0; i < 20; i++) {
    left = (await sbx.commands.run(`ps -o pid=,stat= -s ${h.pid} | grep -v ' Z' || true`, { user: "root" })).stdout.trim();
    if (!left) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(left, "", "kill reaches the background job in the PTY's session");
});
