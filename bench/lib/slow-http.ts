import http from "node:http";
import { NotAvailable } from "./available.js";
import { now, sleep } from "./stats.js";

/** Pacing: at most `rate` bytes/s during the first `slowMs`, then as fast as possible. */
export interface Pace {
  rate: number;
  slowMs: number;
}

function check(res: http.IncomingMessage, what: string): void {
  if (res.statusCode === 501) throw new NotAvailable(`${what}: 501 not implemented`);
  if ((res.statusCode ?? 0) >= 300) throw new Error(`${what}: HTTP ${res.statusCode}`);
}

/** Downloads `url`, reading at `pace` (the socket is paused while ahead of the budget); returns bytes. */
export function slowDownload(url: string, pace: Pace): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false }, (res) => {
      try {
        check(res, "GET /files");
      } catch (err) {
        res.resume();
        return reject(err);
      }
      const t0 = now();
      let n = 0;
      res.on("data", (d: Buffer) => {
        n += d.length;
        const elapsed = now() - t0;
        if (elapsed >= pace.slowMs) return;
        const ahead = (n / pace.rate) * 1000 - elapsed;
        if (ahead > 1) {
          res.pause();
          setTimeout(() => res.resume(), Math.min(ahead, pace.slowMs - elapsed));
        }
      });
      res.on("end", () => resolve(n));
      res.on("error", reject);
    });
    req.on("error", reject);
  });
}

/** Uploads `size` bytes of a repeated block as application/octet-stream, sending at `pace`. */
export async function slowUpload(url: string, size: number, pace: Pace): Promise<void> {
  const block = Buffer.alloc(256 * 1024, 0x61);
  const req = http.request(url, {
    method: "POST",
    agent: false,
    headers: { "content-type": "application/octet-stream", "content-length": size },
  });
  const answer = new Promise<void>((resolve, reject) => {
    req.on("response", (res) => {
      res.resume();
      res.on("end", () => {
        try {
          check(res, "POST /files");
          resolve();
        } catch (err) {
          reject(err);
        }
      });
    });
    req.on("error", reject);
  });
  answer.catch(() => undefined);
  const t0 = now();
  let sent = 0;
  while (sent < size) {
    const chunk = block.subarray(0, Math.min(block.length, size - sent));
    sent += chunk.length;
    if (!req.write(chunk)) await new Promise((r) => req.once("drain", r));
    const elapsed = now() - t0;
    if (elapsed < pace.slowMs) {
      const ahead = (sent / pace.rate) * 1000 - elapsed;
      if (ahead > 1) await sleep(Math.min(ahead, pace.slowMs - elapsed));
    }
  }
  req.end();
  await answer;
}

/** A Connect-protocol JSON server-stream opened over HTTP/1.1 whose response is never read until resumed. */
export interface Stalled {
  /** Reads the rest of the response; resolves with the end-of-stream JSON (error or {}). */
  finish(): Promise<string>;
  abort(): void;
}

/** Opens `procedure` with `body` (JSON) over HTTP/1.1 and leaves the response unread (paused). */
export function stalledStream(baseUrl: string, procedure: string, body: object): Promise<Stalled> {
  const json = Buffer.from(JSON.stringify(body));
  const envelope = Buffer.alloc(5 + json.length);
  envelope.writeUInt32BE(json.length, 1);
  json.copy(envelope, 5);
  return new Promise((resolve, reject) => {
    const req = http.request(`${baseUrl}${procedure}`, {
      method: "POST",
      agent: false,
      headers: { "content-type": "application/connect+json", "connect-protocol-version": "1" },
    });
    req.on("error", reject);
    req.on("response", (res) => {
      res.pause();
      resolve({
        abort: () => req.destroy(),
        finish: () =>
          new Promise((done, fail) => {
            let tail = Buffer.alloc(0);
            let end = "";
            res.on("data", (d: Buffer) => {
              tail = Buffer.concat([tail, d]);
              // Walk complete envelopes; keep only an incomplete remainder.
              while (tail.length >= 5 && tail.length >= 5 + tail.readUInt32BE(1)) {
                const len = tail.readUInt32BE(1);
                if (tail[0] & 0x02) end = tail.subarray(5, 5 + len).toString();
                tail = tail.subarray(5 + len);
              }
            });
            res.on("end", () => done(end));
            res.on("error", fail);
            res.resume();
          }),
      });
    });
    req.end(envelope);
  });
}
