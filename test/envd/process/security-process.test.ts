// Processes under attack: users whose ids do not fit a signed 32-bit integer must run as
// themselves (never as root), and a Start loop that leaves background children holding the
// output pipes must meet the process limit instead of exhausting the daemon's descriptors.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { ROOT, startDaemon, type Daemon } from "../helpers/daemon.js";
import { basicAuth, clients, sdkSandbox } from "../helpers/clients.js";

let scratch: string;
let passwd: string;
let group: string;

const BIG = 3_000_000_000;
/** Users whose ids cannot be applied: setuid(2^32 - 1) and setpriv of 2^32 + n would leave the process as root. */
const UNAPPLICABLE = ["envd-minus-one", "envd-wrap-gid", "envd-too-big", "envd-bad-group"];

before(() => {
  // A private copy of the user database, bind-mounted over /etc/passwd and /etc/group in the
  // daemon's own mount namespace: the host's database is never edited (shadow's useradd refuses
  // ids such as 2^32 - 1 anyway, which the daemon must still refuse when it finds them).
  scratch = mkdtempSync(join(tmpdir(), "envd-secproc-"));
  passwd = join(scratch, "passwd");
  group = join(scratch, "group");
  writeFileSync(
    passwd,
    readFileSync("/etc/passwd", "utf8") +
      [
        `envd-big:x:${BIG}:${BIG}::/tmp:/bin/sh`,
        `envd-minus-one:x:4294967295:1001::/tmp:/bin/sh`,
        `envd-wrap-gid:x:1001:4294967295::/tmp:/bin/sh`,
        `envd-too-big:x:4294967296:4294967296::/tmp:/bin/sh`,
        `envd-bad-group:x:${BIG}:${BIG}::/tmp:/bin/sh`,
        `envd-empty-uid:x::1001::/tmp:/bin/sh`,
      ].join("\n") +
      "\n",
  );
  writeFileSync(group, readFileSync("/etc/group", "utf8") + [`envd-big:x:${BIG}:`, `envd-minus:x:4294967295:envd-bad-group`].join("\n") + "\n");
});

after(() => rmSync(scratch, { recursive: true, force: true }));

/** The daemon in a mount namespace of its own with the test's user database (and optionally without setpriv and the addon). */
function isolated(opts: { bare?: boolean } = {}): Promise<Daemon> {
  const mounts = [`mount --bind ${passwd} /etc/passwd`, `mount --bind ${group} /etc/group`];
  if (opts.bare) {
    // No setpriv (ids go to node-pty and Node's spawn as numbers) and no addon (Node's spawn, not ours).
    for (const dir of ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]) mounts.push(`{ ! [ -e ${dir}/setpriv ] || mount --bind /dev/null ${dir}/setpriv; }`);
    mounts.push(`mount -t tmpfs none ${join(ROOT, "native", "build", "Release")}`);
  }
  const script = `${mounts.join(" && ")} && exec "$@"`;
  return startDaemon({ prefix: ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "envd-ns"] });
}

async function run(d: Daemon, user: string, cmd: string, pty = false): Promise<{ out: string; exit: number }> {
  const c = clients(d.url);
  let out = "";
  let exit = -999;
  const req = { process: { cmd: "/bin/sh", args: ["-c", cmd] }, stdin: false, ...(pty ? { pty: { size: { cols: 80, rows: 24 } } } : {}) };
  for await (const r of c.proc.json.start(req, { headers: basicAuth(user) })) {
    const ev = r.event?.event;
    if (ev?.case === "data") out += Buffer.from((ev.value.output.value as Uint8Array) ?? []).toString();
    if (ev?.case === "end") exit = ev.value.exitCode;
  }
  return { out, exit };
}

for (const bare of [false, true]) {
  const how = bare ? "without setpriv or the addon (Node's spawn, ids to node-pty)" : "with the native spawn and setpriv";
  test(`ids of 2^31 and above are applied as unsigned: piped and PTY, connect-node and SDK, ${how}`, async () => {
    const d = await isolated({ bare });
    try {
      if (bare) {
        assert.match(d.logs(), /setpriv not found/);
        assert.doesNotMatch(readFileSync(`/proc/${d.pid}/maps`, "utf8"), /inotify\.node/, "the addon was loaded");
      }
      const ids = "id -u; id -g";
      for (const pty of [false, true]) {
        const r = await run(d, "envd-big", ids, pty);
        assert.equal(r.exit, 0, r.out);
        assert.deepEqual(r.out.trim().split(/\r?\n/), [String(BIG), String(BIG)], `pty=${pty}`);
      }
      const sbx = await sdkSandbox(d.url);
      const r = await sbx.commands.run(ids, { user: "envd-big" });
      assert.deepEqual(r.stdout.trim().split("\n"), [String(BIG), String(BIG)]);
      let text = "";
      const term = await sbx.pty.create({ cols: 80, rows: 24, user: "envd-big", onData: (b) => {
        text += Buffer.from(b).toString();
      } });
      await sbx.pty.sendInput(term.pid, new TextEncoder().encode('echo "ids=$(id -u):$(id -g)"; exit\n'));
      await term.wait();
      assert.match(text, new RegExp(`ids=${BIG}:${BIG}`));
    } finally {
      await d.stop();
    }
  });

  test(`a user whose ids cannot be applied gets a clear error, never a root process, ${how}`, async () => {
    const d = await isolated({ bare });
    try {
      for (const user of UNAPPLICABLE) {
        for (const pty of [false, true]) {
          await assert.rejects(
            run(d, user, "id -u", pty),
            (e: unknown) => e instanceof ConnectError && e.code === Code.PermissionDenied && /cannot start a process as user .*not a valid id/.test(e.message),
            `${user} pty=${pty}`,
          );
        }
      }
      const sbx = await sdkSandbox(d.url);
      await assert.rejects(sbx.commands.run("id -u", { user: "envd-minus-one" }), /not a valid id/);
      // An empty uid field is not uid 0: that line names no user at all.
      await assert.rejects(run(d, "envd-empty-uid", "id -u"), (e: unknown) => e instanceof ConnectError && e.code === Code.Unauthenticated);
      // The daemon is fine and still runs the others.
      assert.equal((await run(d, "envd-big", "id -u")).out.trim(), String(BIG));
    } finally {
      await d.stop();
    }
  });
}

function fdCount(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

test("finished processes whose background children hold the output count against the limit: descriptors stay bounded", async () => {
  const LIMIT = 12;
  const d = await startDaemon({ args: ["--max-processes", String(LIMIT)] });
  const sleepers: number[] = [];
  try {
    const baseline = fdCount(d.pid);
    let started = 0;
    let refused: ConnectError | undefined;
    for (let i = 0; i < LIMIT * 3; i++) {
      try {
        // The main process exits at once; `sleep` keeps both output pipes open.
        const r = await run(d, "user", "sleep 1000 & echo $!");
        assert.equal(r.exit, 0);
        sleepers.push(Number(r.out.trim()));
        started++;
      } catch (e) {
        assert.ok(e instanceof ConnectError, String(e));
        refused = e;
      }
    }
    assert.ok(refused, `every one of ${LIMIT * 3} Starts was accepted: lingering outputs are not counted`);
    assert.equal(refused.code, Code.ResourceExhausted);
    assert.match(refused.message, /too many processes.*background children/);
    assert.ok(started <= LIMIT, `${started} Starts accepted with a limit of ${LIMIT}`);
    // Two pipe ends per lingering process, plus a little slack for the client's connections.
    const grown = fdCount(d.pid) - baseline;
    assert.ok(grown <= LIMIT * 2 + 8, `the daemon holds ${grown} more descriptors than at start`);
    const health = await fetch(`${d.url}/health`);
    assert.equal(health.status, 204);
    // Ending the background children frees the slots: Starts succeed again.
    for (const pid of sleepers) process.kill(pid, "SIGKILL");
    sleepers.length = 0;
    let ok = false;
    for (let i = 0; i < 50 && !ok; i++) {
      try {
        ok = (await run(d, "user", "echo again")).out.trim() === "again";
      } catch {
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    assert.ok(ok, "slots were not freed once the background children ended");
  } finally {
    for (const pid of sleepers) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    await d.stop();
  }
});
