import type { Route } from "../http/routes.js";
import type { Deps } from "../deps.js";
import { compose } from "./compose.js";
import { download } from "./download.js";
import { upload } from "./upload.js";
import { UploadJournal } from "./journal.js";
import { join } from "node:path";

/** GET/POST /files (signature-checked here, so exempt from the token gate) and POST /files/compose. */
export function filesRoutes(deps: Deps): Route[] {
  const journal = new UploadJournal(join(deps.config.runDir, "uploads"));
  void journal.sweep(deps.log);
  return [
    { method: "GET", path: "/files", exempt: true, handler: (r) => download(r, deps) },
    { method: "POST", path: "/files", exempt: true, handler: (r) => upload(r, deps, journal) },
    { method: "POST", path: "/files/compose", handler: (r) => compose(r, deps) },
  ];
}
