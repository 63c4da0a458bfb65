import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { Process, Signal, StreamInputRequestSchema, type ProcessEvent, type StreamInputRequest } from "../../../src/envd/gen/process/process_pb.js";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { clients, basicAuth } from "../helpers/clients.js";

type ProcClient = Client<typeof Process>;
type Ev = ProcessEvent["event"];

let d: Daemon;
let codecs: [string, ProcClient][];

before(async () => {
  d = await startDaemon();
  const c = clients(d.url);
  codecs = [
    ["json", c.proc.json],
    ["binary", c.proc.binary],
  ];
});
after(async () => {
  await d?.stop();
});

const enc = new TextEncoder();
const dec = new TextDecoder();
const pidSel = (pid: number) => ({ selector: { case: "pid" as const, value: pid } });
const tagSel = (tag: string) => ({ selector: { case: "tag" as const, value: tag } });
const sh = (script: string) => ({ cmd: "/bin/bash", args: ["-c", script] });

async function collect(stream: AsyncIterable<{ event?: ProcessEvent }>): Promise<Ev[]> {
  const out: Ev[] = [];
  for await (const r of stream) if (r.event) out.push(r.event.event);
  return out;
}
function stdoutOf(events: Ev[]): string {
  return events.map((e) => (e.case === "data" && e.value.output.case === "stdout" ? dec.decode(e.value.output.value) : "")).join("");
}
function endOf(events: Ev[]) {
  const last = events.at(-1);
  assert.equal(last?.case, "end", `last event must be end, got ${last?.case}`);
  return last.value;
}
/** Starts a process and returns its pid plus an iterator over the rest of the Start stream. */
async function startLive(client: ProcClient, req: Parameters<ProcClient["start"]>[0], opts?: Parameters<ProcClient["start"]>[1]) {
  const it = client.start(req, opts)[Symbol.asyncIterator]();
  const first = await it.next();
  assert.equal(first.value?.event?.event.case, "start");
  const pid = (first.value!.event!.event.value as { pid: number }).pid;
  const rest = collect({ [Symbol.asyncIterator]: () => it });
  return { pid, rest };
}
const expectCode = (code: Code, re?: RegExp) => (e: unknown) => {
  assert.ok(e instanceof ConnectError, String(e));
  assert.equal(Code[e.code], Code[code], e.message);
  if (re) assert.match(e.rawMessage, re);
  return true;
};

for (const codec of ["json", "binary"]) {
  describe(`process over ${codec}`, () => {
    const client = () => codecs.find(([n]) => n === codec)![1];

    test("StreamInput keeps order; a later start switches the target; stdin stays open", async () => {
      const a = await startLive(client(), { process: sh("cat; sleep 1"), stdin: true });
      const b = await startLive(client(), { process: sh("cat"), stdin: true });
      const lines = Array.from({ length: 300 }, (_, i) => `line ${i}\n`);
      async function* input(): AsyncGenerator<StreamInputRequest> {
        yield create(StreamInputRequestSchema, { event: { case: "start", value: { process: pidSel(a.pid) } } });
        for (const l of lines) yield create(StreamInputRequestSchema, { event: { case: "data", value: { input: { input: { case: "stdin", value: enc.encode(l) } } } } });
        yield create(StreamInputRequestSchema, { event: { case: "keepalive", value: {} } });
        yield create(StreamInputRequestSchema, { event: { case: "start", value: { process: pidSel(b.pid) } } });
        yield create(StreamInputRequestSchema, { event: { case: "data", value: { input: { input: { case: "stdin", value: enc.encode("to b\n") } } } } });
      }
      await client().streamInput(input());
      await client().sendInput({ process: pidSel(a.pid), input: { input: { case: "stdin", value: enc.encode("after\n") } } });
      await client().closeStdin({ process: pidSel(a.pid) });
      await client().closeStdin({ process: pidSel(a.pid) }); // idempotent
      await client().closeStdin({ process: pidSel(b.pid) });
      assert.equal(stdoutOf(await a.rest), lines.join("") + "after\n");
      assert.equal(stdoutOf(await b.rest), "to b\n");
    });

    test("StreamInput: data before start is invalid_argument; unknown pid is not_found", async () => {
      async function* early(): AsyncGenerator<StreamInputRequest> {
        yield create(StreamInputRequestSchema, { event: { case: "data", value: { input: { input: { case: "stdin", value: enc.encode("x") } } } } });
      }
      await assert.rejects(client().streamInput(early()), expectCode(Code.InvalidArgument, /before a start/));
      async function* unknown(): AsyncGenerator<StreamInputRequest> {
        yield create(StreamInputRequestSchema, { event: { case: "start", value: { process: pidSel(999_999) } } });
      }
      await assert.rejects(client().streamInput(unknown()), expectCode(Code.NotFound, /pid 999999/));
    });

    test("tags: List shows config as sent; Connect by tag gets live output and the end", async () => {
      const tag = `t-${codec}-${Date.now()}`;
      const p = await startLive(client(), { process: { ...sh("read x; echo got $x; exit 4"), envs: { K: "v" }, cwd: "/tmp" }, tag, stdin: true });
      const listed = (await client().list({})).processes.find((x) => x.pid === p.pid);
      assert.equal(listed?.tag, tag);
      assert.equal(listed?.config?.cmd, "/bin/bash");
      assert.deepEqual(listed?.config?.envs, { K: "v" });
      assert.equal(listed?.config?.cwd, "/tmp");
      const other = await startLive(client(), { process: sh("sleep 5"), tag: `${tag}-other` });
      const viaTag = client().connect({ process: tagSel(tag) });
      const it = viaTag[Symbol.asyncIterator]();
      const first = await it.next();
      assert.deepEqual(first.value?.event?.event.case, "start");
      assert.equal((first.value!.event!.event.value as { pid: number }).pid, p.pid);
      await client().sendInput({ process: tagSel(tag), input: { input: { case: "stdin", value: enc.encode("hi\n") } } });
      const rest = await collect({ [Symbol.asyncIterator]: () => it });
      assert.equal(stdoutOf(rest), "got hi\n");
      assert.equal(endOf(rest).exitCode, 4);
      assert.equal(endOf(await p.rest).exitCode, 4);
      await client().sendSignal({ process: pidSel(other.pid), signal: Signal.SIGKILL });
      await other.rest;
    });

    test("exit retention: a late Connect by pid or tag gets start + end", async () => {
      const tag = `gone-${codec}-${Date.now()}`;
      const events = await collect(client().start({ process: sh("exit 5"), tag }));
      const pid = (events[0].value as { pid: number }).pid;
      assert.equal(endOf(events).exitCode, 5);
      assert.equal((await client().list({})).processes.find((x) => x.pid === pid), undefined);
      for (const sel of [pidSel(pid), tagSel(tag)]) {
        const late = await collect(client().connect({ process: sel }));
        assert.deepEqual(late.map((e) => e.case), ["start", "end"]);
        assert.equal((late[0].value as { pid: number }).pid, pid);
        assert.equal(endOf(late).exitCode, 5);
        assert.equal(endOf(late).status, "exit status 5");
      }
      await assert.rejects(client().sendInput({ process: pidSel(pid), input: { input: { case: "stdin", value: enc.encode("x") } } }), expectCode(Code.NotFound));
    });

    test("a signal reaches grandchildren: no process of the group survives", async () => {
      const p = await startLive(client(), { process: sh("sleep 1000 & sleep 1000 & wait") });
      await new Promise((r) => setTimeout(r, 200));
      const members = () => execFileSync("ps", ["-o", "pid=,stat=", "-g", String(p.pid)]).toString().split("\n").filter((l) => l.trim() && !/\sZ/.test(l));
      const ps = () => {
        try {
          return members();
        } catch {
          return []; // ps exits 1 when nothing matches
        }
      };
      assert.equal(ps().length, 3, "bash and two sleeps share the process group");
      await client().sendSignal({ process: pidSel(p.pid), signal: Signal.SIGTERM });
      const end = endOf(await p.rest);
      assert.equal(end.status, "signal: terminated");
      assert.equal(end.exitCode, -1);
      let left = ps();
      for (let i = 0; i < 20 && left.length; i++) {
        await new Promise((r) => setTimeout(r, 50));
        left = ps();
      }
      assert.deepEqual(left, [], "grandchildren must be gone too");
    });

    test("the end event is not held by a grandchild that keeps the pipes open", async () => {
      const started = Date.now();
      const events = await collect(client().start({ process: sh("sleep 30 & echo $! ; echo main done") }));
      assert.ok(Date.now() - started < 5000, "end must come soon after the main process exits");
      assert.equal(endOf(events).exitCode, 0);
      const [bg, msg] = stdoutOf(events).trim().split("\n");
      assert.equal(msg, "main done");
      assert.doesNotThrow(() => process.kill(Number(bg), 0), "the background child keeps running");
      process.kill(Number(bg), "SIGKILL");
    });

    test("the user's uid, gid and supplementary groups", async () => {
      const group = `envdt${process.pid % 100000}${codec[0]}`;
      execFileSync("groupadd", [group]);
      try {
        execFileSync("usermod", ["-aG", group, "user"]);
        const gid = execFileSync("getent", ["group", group]).toString().split(":")[2];
        const events = await collect(client().start({ process: { cmd: "id", args: [] } }));
        const out = stdoutOf(events);
        assert.match(out, /^uid=1001\(user\) gid=1001\(user\) groups=1001\(user\),/);
        assert.ok(out.includes(`${gid}(${group})`), out);
        const root = await collect(client().start({ process: { cmd: "id", args: ["-u"] } }, { headers: basicAuth("root") }));
        assert.equal(stdoutOf(root), "0\n");
      } finally {
        execFileSync("groupdel", ["-f", group]);
      }
    });

    /** Whether process `pid` is gone (kill -0 fails) within `ms`. */
    const goneWithin = async (pid: number, ms: number): Promise<boolean> => {
      for (const end = Date.now() + ms; Date.now() < end; ) {
        await new Promise((r) => setTimeout(r, 50));
        try {
          process.kill(pid, 0);
        } catch {
          return true;
        }
      }
      return false;
    };

    test("Connect-Timeout-Ms kills the process and ends the stream with deadline_exceeded", async () => {
      const it = client().start({ process: sh("sleep 30") }, { timeoutMs: 700 })[Symbol.asyncIterator]();
      const pid = ((await it.next()).value!.event!.event.value as { pid: number }).pid;
      await assert.rejects(collect({ [Symbol.asyncIterator]: () => it }), expectCode(Code.DeadlineExceeded));
      assert.equal(await goneWithin(pid, 2000), true, "the process outliving its timeout must be killed");
    });

    test("Connect-Timeout-Ms is the process's lifetime even when its client leaves before it", async () => {
      const ac = new AbortController();
      const it = client().start({ process: sh("sleep 30") }, { timeoutMs: 1500, signal: ac.signal })[Symbol.asyncIterator]();
      const pid = ((await it.next()).value!.event!.event.value as { pid: number }).pid;
      ac.abort();
      await assert.rejects(it.next());
      await new Promise((r) => setTimeout(r, 300));
      assert.doesNotThrow(() => process.kill(pid, 0), "the client leaving does not kill the process");
      assert.equal(await goneWithin(pid, 4000), true, "the process outliving its timeout must be killed");
    });

    test("bad input answers", async () => {
      const c = client();
      await assert.rejects(collect(c.start({ process: { cmd: "", args: [] } })), expectCode(Code.InvalidArgument, /cmd/));
      await assert.rejects(collect(c.start({})), expectCode(Code.InvalidArgument));
      await assert.rejects(collect(c.connect({ process: pidSel(999_999) })), expectCode(Code.NotFound, /process with pid 999999 not found/));
      await assert.rejects(collect(c.connect({ process: tagSel("no-such-tag") })), expectCode(Code.NotFound, /tag no-such-tag/));
      await assert.rejects(collect(c.connect({})), expectCode(Code.InvalidArgument, /selector/));
      await assert.rejects(c.sendSignal({ process: pidSel(999_999), signal: Signal.SIGKILL }), expectCode(Code.NotFound));
      const p = await startLive(c, { process: sh("sleep 30") });
      try {
        await assert.rejects(c.sendSignal({ process: pidSel(p.pid), signal: Signal.UNSPECIFIED }), expectCode(Code.InvalidArgument, /invalid signal: SIGNAL_UNSPECIFIED/));
        await assert.rejects(c.sendSignal({ process: pidSel(p.pid), signal: 2 as Signal }), expectCode(Code.InvalidArgument));
        await assert.rejects(c.update({ process: pidSel(p.pid), pty: { size: { cols: 10, rows: 10 } } }), expectCode(Code.Internal, /tty not assigned/));
        await c.update({ process: pidSel(p.pid) });
        await assert.rejects(c.sendInput({ process: pidSel(p.pid), input: { input: { case: "pty", value: enc.encode("x") } } }), expectCode(Code.Internal, /tty not assigned/));
        await assert.rejects(c.sendInput({ process: pidSel(p.pid), input: {} }), expectCode(Code.InvalidArgument));
        if (codec === "binary") {
          // One codec is enough for the size limit (and JSON would spend seconds on base64).
          const big = new Uint8Array(16 * 1024 * 1024 + 1);
          await assert.rejects(c.sendInput({ process: pidSel(p.pid), input: { input: { case: "stdin", value: big } } }), expectCode(Code.InvalidArgument, /MiB/));
        }
      } finally {
        await c.sendSignal({ process: pidSel(p.pid), signal: Signal.SIGKILL });
        await p.rest;
      }
      await assert.rejects(collect(c.start({ process: sh("true") }, { headers: { "connect-timeout-ms": "soon" } })), expectCode(Code.InvalidArgument));
    });

    test("PTY over raw RPC: CloseStdin is an error, stdin input is refused, output arrives as pty", async () => {
      const c = client();
      const p = await startLive(c, { process: sh("read x; echo pty:$x"), pty: { size: { cols: 40, rows: 10 } } });
      await assert.rejects(c.closeStdin({ process: pidSel(p.pid) }), expectCode(Code.Unknown, /Ctrl\+D/));
      await assert.rejects(c.sendInput({ process: pidSel(p.pid), input: { input: { case: "stdin", value: enc.encode("x") } } }), expectCode(Code.Internal, /tty assigned/));
      await c.sendInput({ process: pidSel(p.pid), input: { input: { case: "pty", value: enc.encode("abc\n") } } });
      const rest = await p.rest;
      const text = rest.map((e) => (e.case === "data" && e.value.output.case === "pty" ? dec.decode(e.value.output.value) : "")).join("");
      assert.match(text, /pty:abc/);
      assert.equal(endOf(rest).exitCode, 0);
    });

    test("keep-alives on idle streams; a zero interval is treated as the default", async () => {
      const events = await collect(client().start({ process: sh("sleep 2.3; echo x") }, { headers: { "keepalive-ping-interval": "1" } }));
      assert.ok(events.filter((e) => e.case === "keepalive").length >= 1, "at least one keep-alive");
      const zero = await collect(client().start({ process: sh("echo ok") }, { headers: { "keepalive-ping-interval": "0" } }));
      assert.equal(stdoutOf(zero), "ok\n");
    });
  });
}
