import { existsSync, readFileSync } from "node:fs";
import { request } from "node:https";
import { join } from "node:path";
import { parseArgs } from "node:util";

const USAGE = `usage: sandboxd template build -f Dockerfile --name NAME [--cpu N] [--memory MIB] [--start-cmd CMD] [--ready-cmd CMD]
       sandboxd template list

Talks to a running sandboxd: the API is https://api.$E2B_DOMAIN (or --api-url), the key is
$E2B_API_KEY (or <data-dir>/api-key), the CA is $NODE_EXTRA_CA_CERTS (or <data-dir>/tls/ca.crt);
--data-dir defaults to $SANDBOXD_DATA_DIR, then /var/lib/sandboxd.
`;

/** Where the API is and how to authenticate to it. */
interface Client {
  base: URL;
  key: string;
  ca?: Buffer;
}

/** One API call; resolves with the status and the parsed JSON body. */
function call(c: Client, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  const url = new URL(path, c.base);
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { "x-api-key": c.key };
    if (payload) Object.assign(headers, { "content-type": "application/json", "content-length": String(payload.length) });
    const req = request(url, { method, headers, ...(c.ca ? { ca: c.ca } : {}) }, (res) => {
      let text = "";
      res.on("data", (d: Buffer) => (text += d));
      res.on("end", () => {
        try {
          resolve({ status: res.statusCode ?? 0, json: text ? JSON.parse(text) : undefined });
        } catch {
          reject(new Error(`the API answered ${res.statusCode} with a body that is not JSON`));
        }
      });
    });
    req.on("error", reject);
    req.end(payload);
  });
}

function must(r: { status: number; json: any }, ok: number): any {
  if (r.status !== ok) throw new Error(`${r.json?.message ?? `the API answered ${r.status}`}`);
  return r.json;
}

/** Builds a Dockerfile through v1 POST /templates, printing the build log live and a progress line per step. */
async function build(c: Client, o: Record<string, string | undefined>, out: NodeJS.WritableStream): Promise<number> {
  if (!o.file || !o.name) throw new Error("template build needs -f Dockerfile and --name NAME");
  const dockerfile = readFileSync(o.file, "utf8");
  const num = (v: string | undefined, what: string) => {
    if (v === undefined) return undefined;
    if (!/^\d+$/.test(v)) throw new Error(`--${what} must be a whole number, got '${v}'`);
    return Number(v);
  };
  const created = must(await call(c, "POST", "/templates", { dockerfile, alias: o.name, cpuCount: num(o.cpu, "cpu"), memoryMB: num(o.memory, "memory"), startCmd: o["start-cmd"], readyCmd: o["ready-cmd"] }), 202);
  out.write(`template ${created.templateID}, build ${created.buildID}\n`);
  let offset = 0;
  for (;;) {
    const st = must(await call(c, "GET", `/templates/${created.templateID}/builds/${created.buildID}/status?logsOffset=${offset}`), 200);
    offset += st.logEntries.length;
    for (const e of st.logEntries as { message: string; step?: string }[]) {
      const progress = /^(CACHED )?\[(\d+)\/(\d+)\]/.exec(e.message);
      out.write(progress ? `==> step ${progress[2]} of ${progress[3]}${progress[1] ? " (cached)" : ""}: ${e.message.replace(/^(CACHED )?\[\d+\/\d+\] /, "")}\n` : `    ${e.message}\n`);
    }
    if ((st.status === "ready" || st.status === "error") && st.logEntries.length === 0) {
      if (st.status === "ready") {
        out.write(`ready: start sandboxes with Sandbox.create('${o.name}')\n`);
        return 0;
      }
      out.write(`build failed${st.reason?.step ? ` in step ${st.reason.step}` : ""}: ${st.reason?.message ?? "no reason given"}\n`);
      return 1;
    }
    if (st.logEntries.length === 0) await new Promise((r) => setTimeout(r, 500));
  }
}

/** Prints the team's templates as a table. */
async function list(c: Client, out: NodeJS.WritableStream): Promise<number> {
  const rows = must(await call(c, "GET", "/templates"), 200) as Record<string, any>[];
  const table = [["TEMPLATE ID", "NAME", "STATUS", "CPU", "MEMORY", "BUILDS", "SPAWNS", "LAST SPAWNED"]];
  for (const t of rows) table.push([t.templateID, t.aliases[0] ?? "", t.buildStatus, String(t.cpuCount), `${t.memoryMB} MiB`, String(t.buildCount), String(t.spawnCount), t.lastSpawnedAt ?? "never"]);
  const widths = table[0].map((_, i) => Math.max(...table.map((r) => r[i].length)));
  for (const r of table) out.write(r.map((cell, i) => cell.padEnd(widths[i])).join("  ").trimEnd() + "\n");
  return 0;
}

/** `sandboxd template ...`: returns the exit code. */
export async function templateCli(argv: string[], env: NodeJS.ProcessEnv, out: NodeJS.WritableStream, err: NodeJS.WritableStream): Promise<number> {
  try {
    const { values, positionals } = parseArgs({
      args: argv, allowPositionals: true, strict: true,
      options: {
        file: { type: "string", short: "f" }, name: { type: "string" }, cpu: { type: "string" }, memory: { type: "string" },
        "start-cmd": { type: "string" }, "ready-cmd": { type: "string" }, "api-url": { type: "string" }, "data-dir": { type: "string" }, help: { type: "boolean", short: "h" },
      },
    });
    if (values.help) return out.write(USAGE), 0;
    const dataDir = values["data-dir"] ?? env.SANDBOXD_DATA_DIR ?? "/var/lib/sandboxd";
    const keyFile = join(dataDir, "api-key");
    const key = env.E2B_API_KEY || (existsSync(keyFile) ? readFileSync(keyFile, "utf8").trim() : "");
    if (!key) throw new Error(`no API key: set E2B_API_KEY or pass the --data-dir that holds api-key`);
    const api = values["api-url"] ?? (env.E2B_DOMAIN ? `https://api.${env.E2B_DOMAIN}` : "");
    if (!api) throw new Error("no API address: set E2B_DOMAIN (as 'sandboxd serve' prints it) or pass --api-url");
    const caFile = join(dataDir, "tls", "ca.crt");
    const client: Client = { base: new URL(api), key, ...(!env.NODE_EXTRA_CA_CERTS && existsSync(caFile) ? { ca: readFileSync(caFile) } : {}) };
    const cmd = positionals.join(" ");
    if (cmd === "build") return await build(client, values as Record<string, string | undefined>, out);
    if (cmd === "list") return await list(client, out);
    err.write(`sandboxd template: unknown command '${cmd}'\n${USAGE}`);
    return 2;
  } catch (e) {
    err.write(`sandboxd template: ${(e as Error).message}\n`);
    return 1;
  }
}
