import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash, X509Certificate } from "node:crypto";
import { request } from "node:https";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { api } from "../helpers/api-client.js";
import { CHROMIUM, launch, type Page } from "../helpers/chromium.js";
import { runSdk } from "../helpers/sdk-run.js";
import { call, sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";

/** Where the screenshots are kept after the run (replaced by the next run). */
const ARTIFACTS = join(tmpdir(), "sandboxd-dashboard-screenshots");
/** Metadata that would run script if the page put it in as markup. */
const HOSTILE = `<img src=x onerror="document.body.dataset.pwned=1">"'&`;

/** The headers of a GET to the dashboard's host. */
function headersOf(s: Sandboxd, ca: Buffer, path: string): Promise<Record<string, string | string[] | undefined>> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port: s.port, path, ca, servername: "e2b.localhost", agent: false, headers: { host: `e2b.localhost:${s.port}` } }, (res) => {
      res.resume();
      resolve(res.headers);
    });
    req.on("error", reject);
    req.end();
  });
}

/** Polls a page expression every 250 ms until it is truthy; fails after `ms`, saying where the page is. */
async function until(page: Page, what: string, expression: string, ms = 60_000): Promise<unknown> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await page.eval(expression);
    if (v) return v;
    if (Date.now() > deadline) {
      const where = await page
        .eval(`location.href + " " + document.readyState + " " + JSON.stringify(performance.getEntriesByType("resource").map((r) => [r.name.split("/").pop(), r.responseStatus, Math.round(r.duration)]))`)
        .catch((e: Error) => e.message);
      assert.fail(`timed out waiting for ${what} at ${String(where)} (requests: ${page.requests.slice(-10).join(" ")}; console: ${page.console.join(" | ")})`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

const skip = sandboxSkipReason() ?? (CHROMIUM ? false : "chromium is not installed");

describe("the dashboard in headless Chromium", { skip }, () => {
  let s: Sandboxd;
  let ca: Buffer;
  let page: Page;
  let origin: string;
  let id = "";

  before(async () => {
    s = await startSandboxd({ args: ["--network-cidr", "198.19.232.0/24"] });
    ca = readFileSync(s.caFile);
    origin = `https://${s.domain}`;
    const cert = new X509Certificate(readFileSync(join(s.dataDir, "tls", "server.crt")));
    const spki = createHash("sha256").update(cert.publicKey.export({ type: "spki", format: "der" })).digest("base64");
    page = await launch({ spkiSha256: spki });
    rmSync(ARTIFACTS, { recursive: true, force: true });
    mkdirSync(ARTIFACTS, { recursive: true });
  });
  after(async () => {
    await page?.close();
    await s?.stop();
  });

  const shot = async (name: string) => writeFileSync(join(ARTIFACTS, name), await page.screenshot());

  test("the page and its files come with a strict CSP; a POST never takes a key; /api/ is the control API", async () => {
    const get = (path: string, opts: Parameters<typeof call>[4] = {}) => call(s.port, ca, "e2b.localhost", path, opts);
    const index = await get("/");
    assert.equal(index.status, 200);
    assert.match(index.body, /<form id="signin" method="post"/);
    const h = await headersOf(s, ca, "/");
    assert.equal(h["content-type"], "text/html; charset=utf-8");
    assert.match(String(h["content-security-policy"]), /default-src 'none'; script-src 'self'; style-src 'self'.*connect-src 'self'.*frame-ancestors 'none'/);
    assert.equal(h["x-content-type-options"], "nosniff");
    assert.equal(h["referrer-policy"], "no-referrer");
    const posted = await get("/", { method: "POST", body: { key: s.apiKey } });
    assert.equal(posted.status, 405);
    assert.equal(JSON.parse(posted.body).code, 405);
    assert.equal((await get("/api/teams")).status, 401);
    const teams = await get("/api/teams", { headers: { "x-api-key": s.apiKey } });
    assert.deepEqual(JSON.parse(teams.body), [{ teamID: "default", name: "default", isDefault: true, apiKey: s.apiKey }]);
    assert.equal((await get("/nothing-here")).status, 404);
    // E2B's CLI links to /dashboard/inspect/sandbox/<id>: the page, opened on that sandbox
    const inspect = await get("/dashboard/inspect/sandbox/iabc123");
    assert.equal(inspect.status, 302);
    assert.equal((await headersOf(s, ca, "/dashboard/inspect/sandbox/iabc123")).location, "/#sandbox=iabc123");
    for (const bad of ["/dashboard/inspect/sandbox/ABC", "/dashboard/inspect/sandbox/a%2F..%2Fb", "/dashboard/inspect/sandbox/a/b"]) {
      assert.equal((await get(bad)).status, 404, bad);
    }
    assert.equal((await get("/app.js")).status, 200);
  });

  test("sign in, see an SDK-made sandbox (hostile metadata shown as text), the charts, then kill it from the page", async () => {
    const made = await runSdk(s, `
      import { Sandbox } from "e2b";
      const sbx = await Sandbox.create({ timeoutMs: 300_000, metadata: { note: ${JSON.stringify(HOSTILE)} } });
      console.log(JSON.stringify({ id: sbx.sandboxId }));
    `);
    id = made.id;

    await page.navigate(`${origin}/`);
    await until(page, "the page's script", `document.body.dataset.ready === "1"`);
    const shown = (id: string) => page.eval<boolean>(`document.getElementById(${JSON.stringify(id)}).checkVisibility()`);
    assert.deepEqual([await shown("signin"), await shown("app")], [true, false]);
    await shot("1-signin.png");

    // A wrong key is refused on the page.
    await page.eval(`document.getElementById("key").value = "e2b_00000000"; document.getElementById("signin").requestSubmit()`);
    await until(page, "the refusal", `document.getElementById("signin-error").textContent === "That key is not valid."`);

    await page.eval(`document.getElementById("key").value = ${JSON.stringify(s.apiKey)}; document.getElementById("signin").requestSubmit()`);
    await until(page, "the sandbox row", `document.querySelector('tr[data-sandbox-id="${id}"]')`);
    const row = await page.eval<string[]>(`[...document.querySelector('tr[data-sandbox-id="${id}"]').cells].map((c) => c.textContent)`);
    assert.deepEqual([await shown("signin"), await shown("app"), await shown("signout")], [false, true, true]);
    assert.equal(row[0], id);
    assert.equal(row[1], "base");
    assert.equal(row[2], "running");
    assert.equal(row[7], `note=${HOSTILE}`);
    assert.equal(await page.eval(`document.querySelectorAll("#sandboxes img").length`), 0);
    assert.equal(await page.eval(`document.body.dataset.pwned ?? "no"`), "no");
    assert.match(String(await page.eval(`document.getElementById("team").textContent`)), /team default \(default\)/);
    assert.match(String(await page.eval(`[...document.querySelectorAll("#templates tbody td")].map((c) => c.textContent).join(" ")`)), /^base [a-z0-9]{20} ready 2 /);
    // The build log on demand: base is built in, so it has no API builds to show.
    assert.equal(await shown("build-log"), false);
    await page.eval(`document.querySelector("#templates tbody button.logs").click()`);
    await until(page, "the build log", `document.querySelector("#build-log pre").textContent.includes("no builds")`);
    assert.equal(await shown("build-log"), true);

    // The charts draw once the sampler has a bucket with the sandbox in it, and CPU/memory once envd was polled.
    await until(page, "chart points", `Number(document.body.dataset.chartPoints) > 0`, 40_000);
    assert.equal(await page.eval(`document.querySelectorAll("#chart-concurrent canvas, #chart-rate canvas").length`), 2);
    await until(page, "CPU and memory", `document.querySelector('tr[data-sandbox-id="${id}"]').cells[6].textContent.includes("MiB")`, 40_000);
    // Sparklines once there are two readings.
    await until(page, "sparklines", `document.querySelectorAll('tr[data-sandbox-id="${id}"] svg.spark polyline').length === 2`, 40_000);
    await shot("2-signed-in.png");

    // The sandbox's log on demand, and where E2B's CLI links to a sandbox: this page on its log.
    assert.equal(await shown("sandbox-log"), false);
    await page.eval(`document.querySelector('tr[data-sandbox-id="${id}"] button.logs').click()`);
    await until(page, "the sandbox's log", `document.querySelector("#sandbox-log pre").textContent.includes("listening")`);
    assert.match(String(await page.eval(`document.getElementById("sandbox-log-title").textContent`)), new RegExp(id));
    await page.navigate(`${origin}/`);
    await until(page, "the page again", `document.body.dataset.ready === "1" && !document.getElementById("app").hidden`);
    assert.equal(await shown("sandbox-log"), false);
    await page.navigate(`${origin}/dashboard/inspect/sandbox/${id}`, `${origin}/#sandbox=${id}`);
    await until(page, "the inspected sandbox's log", `document.getElementById("sandbox-log").dataset.sandboxId === ${JSON.stringify(id)} && document.querySelector("#sandbox-log pre").textContent.includes("/init")`);
    assert.equal(String(await page.eval("location.pathname + location.hash")), `/#sandbox=${id}`);
    assert.equal(await page.eval(`document.querySelectorAll("#sandbox-log pre *").length`), 0, "log text is text, not markup");
    await shot("3-sandbox-log.png");

    // Nothing left the origin, and the key is in no URL (a data: URL is no request: Chromium
    // reports the images it decodes from them too, at times).
    for (const url of page.requests.filter((u: string) => !u.startsWith("data:"))) {
      assert.ok(url.startsWith(`${origin}/`), `request outside the origin: ${url}`);
      assert.ok(!url.includes(s.apiKey), "a URL carries the key");
    }
    assert.ok(!String(await page.eval("location.href")).includes("e2b_"));

    await page.eval(`document.querySelector('tr[data-sandbox-id="${id}"] button.kill').click()`);
    await until(page, "the row to go", `!document.querySelector('tr[data-sandbox-id="${id}"]')`);
    assert.equal(await page.eval(`document.getElementById("no-sandboxes").hidden`), false);
    await shot("4-killed.png");
    const gone = await api(s, ca, "GET", `/sandboxes/${id}`);
    assert.equal(gone.status, 404);
    assert.deepEqual(page.console.filter((l) => l.startsWith("exception")), []);

    // Sign out forgets the key.
    await page.eval(`document.getElementById("signout").click()`);
    assert.equal(await page.eval(`sessionStorage.length`), 0);
    assert.deepEqual([await shown("signin"), await shown("app")], [true, false]);
  });
});
