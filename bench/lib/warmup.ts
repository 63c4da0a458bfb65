import { closeSync, mkdirSync, openSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isUnavailable } from "./available.js";
import { download, upload } from "./files-http.js";
import { startToEnd } from "./process-stream.js";
import { benchTransports } from "./transports.js";

async function tolerant(fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    if (!isUnavailable(err)) throw err;
  }
}

/**
 * A workload touching every service once over both codecs: commands with output, Stat,
 * ListDir, a watch with events, upload and download. Features the daemon lacks are skipped.
 */
export async function warmUp(url: string, tmp: string, quick: boolean): Promise<void> {
  const t = benchTransports(url);
  const dir = join(tmp, "warmup");
  mkdirSync(dir, { recursive: true });
  for (let i = 0; i < 200; i++) closeSync(openSync(join(dir, `f${i}`), "w"));
  const mb = quick ? 4 : 64;
  for (const c of [t.proc.binary, t.proc.json]) {
    for (let i = 0; i < 10; i++) await startToEnd(c, "/bin/echo", ["warm", String(i)]);
    await startToEnd(c, "/usr/bin/head", ["-c", String(mb * 2 ** 20), "/dev/zero"]);
  }
  for (const c of [t.fs.binary, t.fs.json]) {
    await tolerant(async () => {
      for (let i = 0; i < 50; i++) await c.stat({ path: dir });
      await c.listDir({ path: dir, depth: 1 });
      await c.listDir({ path: "/usr/lib", depth: 2 });
    });
    await tolerant(async () => {
      const ac = new AbortController();
      const stream = c.watchDir({ path: dir, recursive: true }, { signal: ac.signal });
      let seen = 0;
      for await (const res of stream) {
        if (res.event.case === "start") for (let i = 0; i < 100; i++) writeFileSync(join(dir, `w${i}`), "x");
        else if (res.event.case === "filesystem" && ++seen >= 100) break;
      }
      ac.abort();
    });
  }
  const file = join(dir, "blob.bin");
  writeFileSync(file, Buffer.alloc(mb * 2 ** 20, 7));
  const q = `${url}/files?path=${encodeURIComponent(file)}&username=root`;
  await tolerant(() => download(q, false, "GET /files"));
  await tolerant(() => download(q, true, "GET /files gzip"));
  await tolerant(async () =>
    upload(q, { method: "POST", headers: { "content-type": "application/octet-stream" }, body: Buffer.alloc(mb * 2 ** 20, 9) }, "POST /files"),
  );
  rmSync(dir, { recursive: true, force: true });
}
