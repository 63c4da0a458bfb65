// The identity model: the daemon runs as root; a request names a user (Basic auth for RPCs,
// `username` for /files) who owns what it creates and whom its processes run as. Processes
// cannot escape that user (uid, gid, groups, environment). Uploads and compose act with that
// user's permissions (security-files.test.ts); the other file operations are the daemon's own and
// ignore them, as in the reference (envd-behaviour §0, §12.15).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { basicAuth, clients } from "../helpers/clients.js";

const DAEMON_SECRET = "daemon-env-3b9d1f";
const TOKEN = "tok-identity-81c2";
let d: Daemon;
let scratch: string;
let rootOnly: string;

before(async () => {
  scratch = join("/tmp", `envd-identity-${process.pid}`);
  mkdirSync(scratch, { recursive: true });
  chmodSync(scratch, 0o1777); // like /tmp: every user may create files here
  rootOnly = join("/root", `.envd-identity-${process.pid}`);
  writeFileSync(rootOnly, "root eyes only");
  chmodSync(rootOnly, 0o600);
  d = await startDaemon({ env: { ENVD_TEST_DAEMON_SECRET: DAEMON_SECRET } });
  await fetch(`${d.url}/init`, { method: "POST", body: JSON.stringify({ accessToken: TOKEN }) });
});

after(async () => {
  await d?.stop();
  rmSync(scratch, { recursive: true, force: true });
  rmSync(rootOnly, { force: true });
});

const auth = (user?: string) => ({ "x-access-token": TOKEN, ...(user ? basicAuth(user) : {}) });

async function run(script: string, user?: string): Promise<{ out: string; exit: number }> {
  const c = clients(d.url);
  let out = "";
  let exit = -999;
  for await (const r of c.proc.json.start({ process: { cmd: "/bin/sh", args: ["-c", script] }, stdin: false }, { headers: auth(user) })) {
    const ev = r.event?.event;
    if (ev?.case === "data") out += Buffer.from(ev.value.output.value as Uint8Array).toString();
    if (ev?.case === "end") exit = ev.value.exitCode;
  }
  return { out, exit };
}

test("processes run as the named user: uid, gid, supplementary groups, HOME and USER", async () => {
  const expectGroups = (name: string) => execFileSync("id", ["-G", name], { encoding: "utf8" }).trim().split(/\s+/).sort().join(" ");
  const script = 'echo "$(id -u) $(id -g)"; id -G | tr " " "\\n" | sort | tr "\\n" " "; echo; echo "$HOME $USER"';
  const cases: [string | undefined, string, string, string][] = [
    [undefined, "1001 1001", expectGroups("user"), "/home/user user"],
    ["root", "0 0", expectGroups("root"), "/root root"],
    ["nobody", "65534 65534", expectGroups("nobody"), "/nonexistent nobody"],
  ];
  for (const [user, ids, groups, home] of cases) {
    const { out, exit } = await run(script, user);
    assert.equal(exit, 0, `${user ?? "default"}: ${out}`);
    const [l1, l2, l3] = out.trim().split("\n");
    assert.equal(l1, ids, `${user ?? "default"} ids`);
    assert.equal(l2.trim(), groups, `${user ?? "default"} groups`);
    assert.equal(l3, home, `${user ?? "default"} home`);
  }
  await assert.rejects(
    run("true", "no-such-user"),
    (e: unknown) => e instanceof ConnectError && e.code === Code.Unauthenticated && /invalid username: 'no-such-user'/.test(e.message),
  );
});

test("a process cannot reach beyond its user: root-only files stay closed, privileges cannot be regained", async () => {
  const denied = await run(`cat ${rootOnly}`);
  assert.notEqual(denied.exit, 0);
  assert.match(denied.out, /Permission denied/);
  const sudo = await run("setpriv --reuid=0 true 2>&1 || echo refused");
  assert.match(sudo.out, /refused|not permitted|Operation not permitted/i);
  // Nothing of the daemon's own environment or its access token reaches the process.
  const env = await run("env");
  assert.equal(env.out.includes(DAEMON_SECRET), false, "the daemon's environment leaked into a process");
  assert.equal(env.out.includes(TOKEN), false, "the access token leaked into a process");
});

test("files created through a request belong to the named user; the default user when none is named", async () => {
  const c = clients(d.url);
  const up = async (name: string, username?: string) => {
    const u = new URL(`${d.url}/files`);
    u.searchParams.set("path", join(scratch, name));
    if (username !== undefined) u.searchParams.set("username", username);
    const r = await fetch(u, { method: "POST", headers: { "content-type": "application/octet-stream", "x-access-token": TOKEN }, body: "x" });
    assert.equal(r.status, 200, name);
    return statSync(join(scratch, name));
  };
  assert.equal((await up("default.txt")).uid, 1001);
  assert.equal((await up("root.txt", "root")).uid, 0);
  assert.equal((await up("nobody.txt", "nobody")).uid, 65534);
  const unknown = await fetch(`${d.url}/files?path=${encodeURIComponent(join(scratch, "x"))}&username=no-such-user`, { method: "POST", headers: { "content-type": "application/octet-stream", "x-access-token": TOKEN }, body: "x" });
  assert.equal(unknown.status, 401);
  await c.fs.json.makeDir({ path: join(scratch, "a", "b") }, { headers: auth("nobody") });
  assert.equal(statSync(join(scratch, "a")).uid, 65534, "parents too");
  assert.equal(statSync(join(scratch, "a", "b")).uid, 65534);
});

test("file operations are the daemon's (root) and ignore the user's permissions, as in the reference", async () => {
  // Documented model, not an escape: a sandbox has one tenant, and the reference behaves the same.
  const c = clients(d.url);
  const st = await c.fs.json.stat({ path: rootOnly }, { headers: auth() });
  assert.equal(st.entry?.owner, "root");
  const r = await fetch(`${d.url}/files?path=${encodeURIComponent(rootOnly)}&username=user`, { headers: { "x-access-token": TOKEN } });
  assert.equal(r.status, 200);
  assert.equal(await r.text(), "root eyes only");
});
