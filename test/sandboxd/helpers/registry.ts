/**
 * A real OCI registry on loopback for tests: Debian's docker-registry (the CNCF distribution
 * server) with filesystem storage in a temp dir, plain HTTP or TLS with a given certificate,
 * optionally behind htpasswd basic auth; and pushes into it with skopeo.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./sandboxd.js";

/** A running registry. */
export interface Registry {
  /** 127.0.0.1:PORT */
  host: string;
  stop(): Promise<void>;
}

/** Whether the registry tools are installed (the test skips with the reason otherwise). */
export function registrySkipReason(): string | undefined {
  for (const tool of ["docker-registry", "skopeo", "umoci", "htpasswd"]) {
    if (spawnSync("sh", ["-c", `command -v ${tool}`]).status !== 0) return `${tool} is not installed (apt-get install skopeo umoci docker-registry apache2-utils)`;
  }
  return undefined;
}

/** GET /v2/ until the registry answers (401 counts: it is up, behind auth). */
async function waitUp(host: string, child: ChildProcess, log: () => string, tls: boolean): Promise<void> {
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`docker-registry exited ${child.exitCode}: ${log()}`);
    const status = await new Promise<number>((resolve) => {
      const url = `${tls ? "https" : "http"}://${host}/v2/`;
      const answered = (res: IncomingMessage) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      };
      const req = tls ? httpsRequest(url, { rejectUnauthorized: false }, answered) : request(url, answered);
      req.on("error", () => resolve(0));
      req.end();
    });
    if (status === 200 || status === 401) return;
    if (i > 200) throw new Error(`docker-registry did not answer on ${host}: ${log()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Starts a registry on a free loopback port; `auth` puts it behind basic auth for that user, `tls`
 * (PEM files) serves it over TLS only.
 */
export async function startRegistry(auth?: { user: string; password: string }, tls?: { cert: string; key: string }): Promise<Registry> {
  const dir = mkdtempSync(join(tmpdir(), "oci-registry-"));
  const port = await freePort();
  const host = `127.0.0.1:${port}`;
  let authBlock = "";
  if (auth) {
    const r = spawnSync("htpasswd", ["-Bbn", auth.user, auth.password], { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`htpasswd failed: ${r.stderr}`);
    writeFileSync(join(dir, "htpasswd"), r.stdout);
    authBlock = `auth:\n  htpasswd:\n    realm: test\n    path: ${join(dir, "htpasswd")}\n`;
  }
  writeFileSync(
    join(dir, "config.yml"),
    `version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: ${join(dir, "data")}\n  delete:\n    enabled: true\nhttp:\n  addr: ${host}\n${tls ? `  tls:\n    certificate: ${tls.cert}\n    key: ${tls.key}\n` : ""}${authBlock}`,
  );
  const child = spawn("docker-registry", ["serve", join(dir, "config.yml")], { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (log = (log + d).slice(-4000)));
  try {
    await waitUp(host, child, () => log, !!tls);
  } catch (err) {
    child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    host,
    stop: async () => {
      if (child.exitCode === null) {
        const gone = new Promise((r) => child.once("exit", r));
        child.kill("SIGTERM");
        await gone;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Pushes image `tag` of an OCI layout to `ref` (host/repo:tag) with skopeo; `all` pushes a whole index. */
export function push(layout: string, tag: string, ref: string, o: { creds?: string; all?: boolean } = {}): void {
  const args = ["copy", "-q", "--dest-tls-verify=false", ...(o.creds ? ["--dest-creds", o.creds] : ["--dest-no-creds"]), ...(o.all ? ["--all"] : []), `oci:${layout}:${tag}`, `docker://${ref}`];
  const r = spawnSync("skopeo", args, { encoding: "utf8", timeout: 300_000 });
  if (r.status !== 0) throw new Error(`skopeo push of ${tag} to ${ref} failed: ${r.stderr}`);
}
