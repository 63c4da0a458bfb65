/**
 * The warm pool's warm-up command: one `bash -l -c cmd` through envd's Process/Start the way the
 * SDK's commands reach envd through the proxy (cleartext HTTP/2, Connect JSON, the SDK's headers),
 * so that what a claimed sandbox's first command needs in envd (its HTTP/2 server, that path's
 * code) is loaded and compiled before anyone waits for it.
 */
import { connect, constants } from "node:http2";
import { EnvdProtocolError } from "./bounded-read.js";
import { envelope, Envelopes } from "./envelopes.js";
import type { EnvdTarget } from "./process.js";

/** The keep-alive header the SDK sends with every Start (seconds between envd's keep-alive events). */
const KEEPALIVE_PING_HEADER = "keepalive-ping-interval";

/**
 * Runs `bash -l -c cmd` through Process/Start over one h2c session of its own, to its end within
 * `timeoutMs` (connect included); resolves with its exit code. The session is closed afterwards.
 */
export function runOverH2c(t: EnvdTarget, cmd: string, timeoutMs: number): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const session = connect(`http://${t.ip}:${t.port}`, { settings: { enablePush: false } });
    let settled = false;
    const finish = (err: Error | undefined, code?: number) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      session.destroy();
      if (err) reject(err);
      else resolve(code!);
    };
    const timer = setTimeout(() => finish(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    session.on("error", (err) => finish(err));
    const headers: Record<string, string> = {
      ":method": "POST", ":path": "/process.Process/Start", "content-type": "application/connect+json", "connect-protocol-version": "1",
      "connect-timeout-ms": String(timeoutMs), [KEEPALIVE_PING_HEADER]: "50", authorization: `Basic ${Buffer.from(`${t.user}:`).toString("base64")}`,
    };
    if (t.accessToken) headers["x-access-token"] = t.accessToken;
    const stream = session.request(headers);
    const messages = new Envelopes();
    stream.on("response", (h) => {
      if (h[":status"] !== 200) finish(new Error(`envd answered ${String(h[":status"])}`));
    });
    stream.on("data", (chunk: Buffer) => {
      try {
        messages.push(chunk);
        for (let m = messages.next(); m; m = messages.next()) {
          if (m.flags & 2) return finish(new Error(`envd ended the stream: ${String(m.msg.error?.message ?? "no end event").slice(0, 200)}`));
          const end = m.msg.event?.end;
          if (end) return finish(undefined, typeof end.exitCode === "number" ? end.exitCode : end.error ? 1 : 0);
        }
      } catch (err) {
        finish(err instanceof EnvdProtocolError ? err : new EnvdProtocolError(String(err)));
      }
    });
    stream.on("end", () => finish(new Error("envd's stream ended before the process did")));
    stream.on("error", (err) => finish(err));
    stream.on("close", () => {
      if (stream.rstCode !== undefined && stream.rstCode !== constants.NGHTTP2_NO_ERROR) finish(new Error(`envd reset the stream (code ${stream.rstCode})`));
    });
    stream.end(envelope({ process: { cmd: "/bin/bash", args: ["-l", "-c", cmd], ...(t.cwd ? { cwd: t.cwd } : {}) }, stdin: false }));
  });
}
