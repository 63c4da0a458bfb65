import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Debian's headless Chromium, if installed. */
export const CHROMIUM = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => spawnSync(p, ["--version"]).status === 0);

/** One page of a headless Chromium driven over the DevTools protocol. */
export interface Page {
  /** Runs an expression in the page (awaiting a promise it returns) and gives back its JSON value. */
  eval<T = unknown>(expression: string): Promise<T>;
  /** Loads `url` and waits until the document at `landing` (where a redirect leads; default `url`) is complete. */
  navigate(url: string, landing?: string): Promise<void>;
  /** A PNG of the page as it is. */
  screenshot(): Promise<Buffer>;
  /** Every URL the page requested so far. */
  requests: string[];
  /** Console messages and uncaught exceptions of the page. */
  console: string[];
  close(): Promise<void>;
}

/**
 * Starts Chromium headless with a throwaway profile, no background networking and every host
 * name but `*.localhost` unresolvable (so nothing it does leaves this machine), trusting only the
 * given server key (its SPKI SHA-256, base64) for TLS; returns its first page.
 */
export async function launch(opts: { spkiSha256: string }): Promise<Page> {
  if (!CHROMIUM) throw new Error("chromium is not installed");
  const profile = mkdtempSync(join(tmpdir(), "sandboxd-chromium-"));
  // Chromium's own temporary files (its shared memory, with --disable-dev-shm-usage) go under the
  // profile too, so that removing the profile leaves nothing behind in the machine's temp dir.
  const temp = join(profile, "tmp");
  mkdirSync(temp);
  const child: ChildProcess = spawn(CHROMIUM, [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-default-apps", "--disable-extensions",
    "--disable-breakpad", "--disable-domain-reliability", "--no-pings", "--metrics-recording-only", "--safebrowsing-disable-auto-update",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE *.localhost",
    `--ignore-certificate-errors-spki-list=${opts.spkiSha256}`,
    `--user-data-dir=${profile}`, "--window-size=1280,900", "--remote-debugging-port=0", "about:blank",
  ], { stdio: ["ignore", "ignore", "pipe"], detached: true, env: { ...process.env, TMPDIR: temp } });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  /** Kills Chromium's whole process group (its helpers too, which would go on writing the profile), then removes the profile. */
  const cleanup = async () => {
    const group = -child.pid!;
    const signal = (sig: NodeJS.Signals | 0) => {
      try {
        process.kill(group, sig);
        return true;
      } catch {
        return false;
      }
    };
    signal("SIGKILL");
    await exited;
    for (let i = 0; i < 100 && signal(0); i++) await new Promise((r) => setTimeout(r, 50));
    rmSync(profile, { recursive: true, force: true });
  };
  try {
    const browserWs = await new Promise<string>((resolve, reject) => {
      let err = "";
      const timer = setTimeout(() => reject(new Error(`chromium did not start:\n${err}`)), 60_000);
      child.stderr!.on("data", (c: Buffer) => {
        err += c;
        const m = /DevTools listening on (ws:\/\/\S+)/.exec(err);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      });
      child.once("exit", () => reject(new Error(`chromium exited:\n${err}`)));
    });
    const port = new URL(browserWs).port;
    const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as { type: string; webSocketDebuggerUrl: string }[];
    const page = targets.find((t) => t.type === "page");
    if (!page) throw new Error("chromium has no page");
    return await connect(page.webSocketDebuggerUrl, cleanup);
  } catch (err) {
    await cleanup();
    throw err;
  }
}

/** The DevTools session of one page. */
async function connect(url: string, cleanup: () => Promise<void>): Promise<Page> {
  const ws = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener("open", () => resolve(), { once: true });
    ws.addEventListener("error", () => reject(new Error("cannot reach chromium's DevTools")), { once: true });
  });
  let next = 1;
  const waiting = new Map<number, { resolve(v: any): void; reject(e: Error): void }>();
  const events: ((method: string, params: any) => void)[] = [];
  ws.addEventListener("message", (ev) => {
    const msg = JSON.parse(String(ev.data)) as { id?: number; result?: unknown; error?: { message: string }; method?: string; params?: unknown };
    if (msg.id !== undefined) {
      const w = waiting.get(msg.id);
      waiting.delete(msg.id);
      if (msg.error) w?.reject(new Error(msg.error.message));
      else w?.resolve(msg.result);
    } else if (msg.method) for (const f of events) f(msg.method, msg.params);
  });
  const send = (method: string, params: object = {}): Promise<any> =>
    new Promise((resolve, reject) => {
      const id = next++;
      waiting.set(id, { resolve, reject });
      ws.send(JSON.stringify({ id, method, params }));
    });
  const requests: string[] = [];
  const consoleLines: string[] = [];
  let networkChanged = 0;
  events.push((method, params) => {
    if (method === "Network.requestWillBeSent") requests.push(params.request.url);
    if (method === "Runtime.consoleAPICalled") consoleLines.push(`${params.type}: ${params.args.map((a: any) => a.value ?? a.description).join(" ")}`);
    if (method === "Runtime.exceptionThrown") consoleLines.push(`exception: ${params.exceptionDetails.exception?.description ?? params.exceptionDetails.text}`);
    // the browser's own messages: a blocked script, a failed load
    if (method === "Log.entryAdded") consoleLines.push(`${params.entry.level}: ${params.entry.text}`);
    if (method === "Network.loadingFailed") consoleLines.push(`failed: ${params.errorText}${params.blockedReason ? ` (${params.blockedReason})` : ""}`);
    if (method === "Network.loadingFailed" && params.errorText === "net::ERR_NETWORK_CHANGED") networkChanged++;
  });
  await send("Page.enable");
  await send("Runtime.enable");
  await send("Network.enable");
  await send("Log.enable");
  return {
    requests,
    console: consoleLines,
    async eval<T>(expression: string): Promise<T> {
      const r = await send("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true });
      if (r.exceptionDetails) throw new Error(`page: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
      return r.result.value as T;
    },
    async navigate(url: string, landing = url) {
      // Chromium aborts loads in flight with ERR_NETWORK_CHANGED when the machine's addresses
      // change, which other tests' sandboxes (veths) do all the time: such a load is made again.
      for (let attempt = 1; ; attempt++) {
        const before = networkChanged;
        const r = await send("Page.navigate", { url });
        if (r.errorText === "net::ERR_NETWORK_CHANGED" && attempt < 5) {
          await new Promise((res) => setTimeout(res, 200));
          continue;
        }
        if (r.errorText) throw new Error(`navigation to ${url} failed: ${r.errorText}`);
        // Loaded means this URL's document, complete (a load event may still be about:blank's).
        const deadline = Date.now() + 30_000;
        const check = JSON.stringify(landing);
        let loaded = false;
        for (;;) {
          const done = await send("Runtime.evaluate", { expression: `location.href === ${check} && document.readyState === "complete"`, returnByValue: true });
          if (done.result?.value === true) {
            loaded = true;
            break;
          }
          // a change of the machine's addresses during this load may have aborted it: load again
          if (networkChanged !== before && attempt < 5 && Date.now() > deadline - 25_000) break;
          if (Date.now() > deadline) throw new Error(`${url} did not finish loading`);
          await new Promise((res) => setTimeout(res, 100));
        }
        if (loaded && (networkChanged === before || attempt >= 5)) return;
      }
    },
    async screenshot() {
      const r = await send("Page.captureScreenshot", { format: "png", captureBeyondViewport: true });
      return Buffer.from(r.data as string, "base64");
    },
    async close() {
      ws.close();
      await cleanup();
    },
  };
}
