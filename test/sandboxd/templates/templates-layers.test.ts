// Templates kept as layer stacks: sandboxes see the merged stack (later layers' deletions
// included), write only to their own upper, and a rebuild's sandboxes see the new step's files.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { lstatSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";
import { runSdk } from "../helpers/templates.js";

/** A template whose second step deletes, hides and replaces what its first step and the base hold. */
const template = (marker: string) => `
  import { Template, Sandbox } from "e2b";
  const t = Template().fromBaseImage().setUser("root")
    .runCmd("echo a > /etc/layer-a && mkdir -p /opt/gone && echo x > /opt/gone/x && echo keep > /opt/keep")
    .runCmd("rm /etc/layer-a /etc/issue.net && rm -rf /opt/gone && mkdir /opt/gone && echo y > /opt/gone/y && echo ${marker} > /etc/layer-b")
    .setUser("user");
`;

const LOOK = "cat /etc/layer-b; ls /opt/gone; cat /opt/keep; test -e /etc/layer-a || echo no-a; test -e /etc/issue.net || echo no-issue; head -c 0 /etc/os-release && echo os";

describe("templates kept as layer stacks", { skip: sandboxSkipReason() ?? false }, () => {
  let s: Sandboxd;
  before(async () => {
    s = await startSandboxd({ args: ["--network-cidr", "198.19.214.0/24"] });
  });
  after(async () => {
    await s?.stop();
  });

  test("a multi-layer template's sandboxes see later layers' deletions; one sandbox's writes reach neither another nor the next", async () => {
    const got = await runSdk(s, `
      ${template("one")}
      await Template.build(t, "tpl-layers:v1", { memoryMB: 256 });
      const a = await Sandbox.create("tpl-layers:v1");
      const b = await Sandbox.create("tpl-layers:v1");
      const first = (await a.commands.run(${JSON.stringify(LOOK)})).stdout.trim().split("\\n");
      await a.commands.run("echo changed > /etc/layer-b && rm /etc/os-release /opt/keep && echo new > /opt/gone/x && touch /etc/mine", { user: "root" });
      const mine = (await a.commands.run(${JSON.stringify(LOOK)} + "; ls /opt/gone; test -e /etc/mine && echo mine")).stdout.trim().split("\\n");
      const other = (await b.commands.run(${JSON.stringify(LOOK)} + "; test -e /etc/mine || echo not-mine")).stdout.trim().split("\\n");
      await a.kill();
      await b.kill();
      const c = await Sandbox.create("tpl-layers:v1");
      const next = (await c.commands.run(${JSON.stringify(LOOK)} + "; test -e /etc/mine || echo not-mine")).stdout.trim().split("\\n");
      await c.kill();
      console.log(JSON.stringify({ first, mine, other, next }));
    `);
    const pristine = ["one", "y", "keep", "no-a", "no-issue", "os"];
    assert.deepEqual(got.first, pristine);
    assert.deepEqual(got.mine, ["changed", "x", "y", "no-a", "no-issue", "x", "y", "mine"]);
    assert.deepEqual(got.other, [...pristine, "not-mine"]);
    assert.deepEqual(got.next, [...pristine, "not-mine"]);

    // the published rootfs is a stack of links to the cached layers over the base, which no sandbox changed
    const rootfsDir = join(s.dataDir, "templates", "rootfs");
    const stacks = readdirSync(rootfsDir).filter((n) => n.endsWith(".stack"));
    assert.equal(stacks.length, 1, readdirSync(rootfsDir).join(" "));
    const links = readdirSync(join(rootfsDir, stacks[0])).filter((n) => /^\d+$/.test(n)).sort((x, y) => Number(x) - Number(y));
    assert.ok(links.length >= 3, links.join(" "));
    for (const l of links) assert.ok(lstatSync(join(rootfsDir, stacks[0], l)).isSymbolicLink());
    const layers = links.slice(1).map((l) => readlinkSync(join(rootfsDir, stacks[0], l)));
    const top = layers.find((d) => lstatSync(join(d, "etc", "layer-b"), { throwIfNoEntry: false }));
    assert.ok(top, "a layer holds the second step's file");
    assert.equal(readFileSync(join(top, "etc", "layer-b"), "utf8"), "one\n");
    assert.ok(lstatSync(join(top, "etc", "layer-a")).isCharacterDevice(), "the deletion is an overlay whiteout in its layer");
    const keep = layers.find((d) => lstatSync(join(d, "opt", "keep"), { throwIfNoEntry: false }));
    assert.equal(keep && readFileSync(join(keep, "opt", "keep"), "utf8"), "keep\n");
    assert.ok(lstatSync(join(readlinkSync(join(rootfsDir, stacks[0], "0")), "etc", "os-release")), "the base keeps the file a sandbox removed");
  });

  test("a rebuild with one changed step makes a new stack whose sandboxes see the new step's files; the old build's still see the old", async () => {
    const got = await runSdk(s, `
      ${template("two")}
      const logs = [];
      await Template.build(t, "tpl-layers:v2", { memoryMB: 256, onBuildLogs: (e) => logs.push(e.message) });
      const v2 = await Sandbox.create("tpl-layers:v2");
      const v1 = await Sandbox.create("tpl-layers:v1");
      const out = [(await v2.commands.run(${JSON.stringify(LOOK)})).stdout.trim(), (await v1.commands.run("cat /etc/layer-b")).stdout.trim()];
      await v2.kill();
      await v1.kill();
      const child = Template().fromTemplate("tpl-layers").setUser("root").runCmd("cat /etc/layer-b > /inherited && rm /opt/keep").setUser("user");
      await Template.build(child, "tpl-layers-child", { memoryMB: 256 }).catch((e) => { console.log(JSON.stringify({ error: e.message })); process.exit(0); });
      const c = await Sandbox.create("tpl-layers-child");
      const inherited = (await c.commands.run("cat /inherited; ls /opt/gone; test -e /etc/layer-a || echo no-a; test -e /opt/keep || echo no-keep")).stdout.trim();
      await c.kill();
      console.log(JSON.stringify({ out, logs, inherited }));
    `);
    assert.equal(got.error, undefined);
    assert.deepEqual(got.out, [["two", "y", "keep", "no-a", "no-issue", "os"].join("\n"), "one"]);
    assert.ok(got.logs.some((m: string) => m.startsWith("CACHED")), got.logs.join("\n"));
    assert.ok(got.logs.some((m: string) => m.startsWith("finalize: publishing")), got.logs.join("\n"));
    assert.equal(got.inherited, ["two", "y", "no-a", "no-keep"].join("\n"));
  });
});
