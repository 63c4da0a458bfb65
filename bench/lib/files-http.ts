import { randomBytes } from "node:crypto";
import { createReadStream, createWriteStream, openAsBlob } from "node:fs";
import { once } from "node:events";
import http from "node:http";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { fileURLToPath } from "node:url";
import { createGunzip, createGzip } from "node:zlib";
import { NotAvailable, require2xx } from "./available.js";
import { startServerProcess, type ServerProcess } from "./server-process.js";

/** A way to send a file body: raw, multipart form, or raw with Content-Encoding: gzip. */
export type UploadMode = "octet" | "multipart" | "gzip";

/**
 * Writes `size` bytes of base64 text built from a 16 MiB random block (compresses about like
 * source code or logs, ~75 %), and its gzip (level 1) beside it for gzip uploads.
 */
export async function makeSource(path: string, size: number): Promise<{ path: string; gz: string }> {
  const block = Buffer.from(randomBytes(12 * 2 ** 20).toString("base64"));
  const out = createWriteStream(path);
  for (let left = size; left > 0; left -= block.length) {
    if (!out.write(left >= block.length ? block : block.subarray(0, left))) await once(out, "drain");
  }
  out.end();
  await once(out, "finish");
  const gz = path + ".gz";
  await pipeline(createReadStream(path, { highWaterMark: 1 << 20 }), createGzip({ level: 1 }), createWriteStream(gz));
  return { path, gz };
}

/** Request init for uploading `file` (the plain source, or its .gz for mode gzip) in `mode`. */
export async function uploadInit(mode: UploadMode, src: { path: string; gz: string }): Promise<RequestInit> {
  if (mode === "multipart") {
    const form = new FormData();
    form.append("file", await openAsBlob(src.path), "upload.bin");
    return { method: "POST", body: form };
  }
  const headers: Record<string, string> = { "content-type": "application/octet-stream" };
  if (mode === "gzip") headers["content-encoding"] = "gzip";
  return { method: "POST", headers, body: await openAsBlob(mode === "gzip" ? src.gz : src.path) };
}

/** POSTs an upload and waits for the answer (throws on non-2xx; 501 means not available). */
export async function upload(url: string, init: RequestInit, what: string): Promise<void> {
  const res = require2xx(await fetch(url, init), what);
  await res.arrayBuffer();
}

/**
 * GETs a download and counts the (decoded) body bytes without keeping them. Identity goes
 * through fetch; gzip through node:http + zlib, because fetch's own gunzip on Node 20 showed
 * timing-dependent client CPU blow-ups (up to 24 s of client CPU for 64 MiB) that measured
 * the client, not the server.
 */
export async function download(url: string, gzip: boolean, what: string): Promise<number> {
  if (gzip) return gunzipCount(url, what);
  const res = require2xx(await fetch(url, { headers: { "accept-encoding": "identity" } }), what);
  let n = 0;
  const reader = res.body!.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return n;
    n += value.byteLength;
  }
}

function gunzipCount(url: string, what: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent: false, headers: { "accept-encoding": "gzip" } }, (res) => {
        if (res.statusCode === 501) return reject(new NotAvailable(`${what}: 501 not implemented`));
        if (res.statusCode !== 200 || res.headers["content-encoding"] !== "gzip") {
          res.resume();
          return reject(new Error(`${what}: HTTP ${res.statusCode}, content-encoding ${res.headers["content-encoding"]}`));
        }
        let n = 0;
        const gunzip = createGunzip();
        gunzip.on("data", (d: Buffer) => (n += d.length));
        pipeline(res, gunzip).then(() => resolve(n), reject);
      })
      .on("error", reject);
  });
}

/** The baseline server process and its base URL. */
export type RawServer = ServerProcess;

/** Starts bench/lib/raw-server.js as a separate Node process (same Node as the daemon). */
export function startRawServer(): Promise<RawServer> {
  return startServerProcess(join(fileURLToPath(new URL(".", import.meta.url)), "raw-server.js"));
}

