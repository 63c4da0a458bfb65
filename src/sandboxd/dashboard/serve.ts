import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import type { AnyRequest, AnyResponse } from "../server/request.js";
import type { ApiHandler } from "../server/dispatch.js";
import { sendJson } from "../api/http.js";

/** The dashboard's files (built by ./build.sh into dashboard/ beside the sandboxd bundle) and their types. */
const FILES: Record<string, { file: string; type: string }> = {
  "/": { file: "index.html", type: "text/html; charset=utf-8" },
  "/app.js": { file: "app.js", type: "text/javascript; charset=utf-8" },
  "/app.css": { file: "app.css", type: "text/css; charset=utf-8" },
  "/uPlot.min.css": { file: "uPlot.min.css", type: "text/css; charset=utf-8" },
};

/**
 * Only this origin's own files and API: no inline script, nothing from the network, no framing,
 * forms post only here.
 */
const SECURITY_HEADERS = {
  "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cache-control": "no-cache",
};

/** The dashboard directory: the given one, else `dashboard/` beside the running bundle. */
export function resolveDashboardDir(flag?: string, script = process.argv[1] ?? ""): string | undefined {
  const dir = flag ? resolve(flag) : join(dirname(resolve(script)), "dashboard");
  return existsSync(join(dir, "index.html")) ? dir : undefined;
}

/**
 * The handler of `https://<domain>/`: the dashboard's static files, and `/api/…` handed to the
 * control API with the prefix removed (same origin, so the page needs no CORS and no key in a URL).
 */
export function createDashboard(opts: { dir: string | undefined; api: () => ApiHandler | undefined }): (req: AnyRequest, res: AnyResponse) => void {
  const cache = new Map<string, Buffer>();
  const read = (file: string) => {
    let b = cache.get(file);
    if (!b) cache.set(file, (b = readFileSync(join(opts.dir!, file))));
    return b;
  };
  return (req, res) => {
    const url = req.url ?? "/";
    const path = url.split("?", 1)[0];
    if (path === "/api" || path.startsWith("/api/")) {
      const api = opts.api();
      if (!api) return sendJson(res, 503, { code: 503, message: "sandboxd is starting; try again shortly" });
      req.url = url.slice(4) || "/";
      return api(req, res);
    }
    req.resume();
    // where E2B's CLI sends its users for a sandbox: this page, opened on that sandbox's log
    const inspect = /^\/dashboard\/inspect\/sandbox\/([a-z0-9]{1,64})$/.exec(path);
    if (inspect) {
      res.writeHead(302, { ...SECURITY_HEADERS, location: `/#sandbox=${inspect[1]}`, "content-length": "0" });
      return void res.end();
    }
    const entry = FILES[path];
    if (!opts.dir) return sendJson(res, 404, { code: 404, message: "The dashboard is not built into this sandboxd (run ./build.sh)" });
    if (!entry) return sendJson(res, 404, { code: 404, message: `Not found: ${path.slice(0, 200)}` });
    if (req.method !== "GET" && req.method !== "HEAD") {
      return sendJson(res, 405, { code: 405, message: `Method ${req.method} is not allowed on ${path}: sign in from the page (the key is sent only in a header)` }, { allow: "GET, HEAD" });
    }
    const body = read(entry.file);
    res.writeHead(200, { ...SECURITY_HEADERS, "content-type": entry.type, "content-length": String(body.length) });
    if (req.method === "HEAD") res.end();
    else res.end(body);
  };
}
