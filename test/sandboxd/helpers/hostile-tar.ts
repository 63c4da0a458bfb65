import { spawnSync } from "node:child_process";
import { request } from "node:https";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { Header } from "tar";
import { api } from "./api-client.js";
import { NODE, ROOT, type Sandboxd } from "./sandboxd.js";

/** One entry of a hand-made tar: any path, type and link target, as an attacker writes them. */
export interface RawEntry {
  path: string;
  type?: "File" | "Directory" | "SymbolicLink" | "Link" | "CharacterDevice" | "BlockDevice" | "FIFO";
  linkpath?: string;
  body?: Buffer;
  /** Declared size when no body is given (a header that promises more than follows). */
  size?: number;
  mode?: number;
}

/** A tar archive of exactly these entries (no normalisation: `..`, absolute paths and devices stay as written). */
export function rawTar(entries: RawEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    const type = e.type ?? "File";
    const body = e.body ?? Buffer.alloc(0);
    const h = new Header({ path: e.path, type, linkpath: e.linkpath, mode: e.mode ?? (type === "Directory" ? 0o755 : 0o644), size: e.size ?? body.length, mtime: new Date(0), uid: 0, gid: 0 });
    const b = Buffer.alloc(512);
    h.encode(b, 0);
    blocks.push(b, body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

/** A gzip bomb: one file of `bytes` zeros, a few KiB compressed. */
export function gzipBomb(bytes: number): Buffer {
  return gzipSync(rawTar([{ path: "zeros.bin", body: Buffer.alloc(bytes) }]), { level: 9 });
}

/**
 * A bomb under a 1000-fold inflation check: `count` files of `each` bytes, zeros with a random
 * byte every KiB (about 100-fold compressed), each file within any per-file check.
 */
export function spreadBomb(count: number, each: number): Buffer {
  const body = Buffer.alloc(each);
  for (let i = 0; i < each; i += 1024) body[i] = 1 + Math.floor(Math.random() * 255);
  return gzipSync(rawTar(Array.from({ length: count }, (_, i) => ({ path: `part${i}.bin`, body }))), { level: 9 });
}

/** A PUT of `body` to an upload URL: the status and the status text (what the SDK reports). */
export function put(s: Sandboxd, ca: Buffer, url: string, body: Buffer, declared = body.length): Promise<{ status: number; text: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port: s.port, path: u.pathname + u.search, method: "PUT", ca, servername: "api.e2b.localhost", agent: false, headers: { host: u.host, "content-length": String(declared) } },
      (res) => {
        res.resume();
        resolve({ status: res.statusCode ?? 0, text: res.statusMessage ?? "" });
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** Asks for the upload link of `hash` in `templateID` as `key`'s team and uploads `body` there; the PUT's answer. */
export async function upload(s: Sandboxd, ca: Buffer, key: string, templateID: string, hash: string, body: Buffer): Promise<{ status: number; text: string }> {
  const link = await api(s, ca, "GET", `/templates/${templateID}/files/${hash}`, { key });
  if (link.status !== 201) throw new Error(`upload link: ${link.status} ${link.body}`);
  if (link.json.present) throw new Error(`hash ${hash} is already present`);
  return put(s, ca, link.json.url, body);
}

/** Makes a team with `sandboxd keys create` on the running server's store; its API key. */
export function teamKey(s: Sandboxd, team: string): string {
  const r = spawnSync(NODE, [join(ROOT, "dist", "sandboxd"), "keys", "create", "--team", team, "--data-dir", s.dataDir], { encoding: "utf8", timeout: 60_000 });
  const key = /^E2B_API_KEY=(e2b_[0-9a-f]{40})$/m.exec(r.stdout)?.[1];
  if (!key) throw new Error(`keys create failed: ${r.stderr}`);
  return key;
}
