import { sendJson } from "./http.js";
import type { Route } from "./route.js";

const SEG = "[^/]+";

/**
 * Answers an operation of E2B's API that sandboxd does not serve with 501. The SDK turns a 404 of
 * most of these (getInfo of a volume, a secret ...) into "sandbox not found", which
 * would send a user hunting for a sandbox that exists; a 501 reaches them as what it is.
 */
function unserved(method: string, path: string, operation: string, opts: { public?: boolean } = {}): Route {
  return {
    method,
    path: new RegExp(`^${path}$`),
    param: "raw",
    ...(opts.public ? { public: true } : {}),
    handle(c) {
      c.req.resume();
      sendJson(c.res, 501, { code: 501, message: `${operation} is not supported by this server yet` });
    },
  };
}

/**
 * The operations of the spec sandboxd lacks, after every served route (a route served earlier in
 * the table wins, so building one needs no change here). Volume content calls carry a volume's
 * token, not a team key: they are answered without authentication, as no volume can exist.
 */
export const UNSERVED_ROUTES: Route[] = [
  unserved("GET", `/secrets`, "Listing secrets"),
  unserved("POST", `/secrets`, "Creating a secret"),
  unserved("GET", `/secrets/(${SEG})`, "Getting a secret"),
  unserved("POST", `/secrets/(${SEG})`, "Updating a secret"),
  unserved("DELETE", `/secrets/(${SEG})`, "Deleting a secret"),
  unserved("GET", `/volumes`, "Listing volumes"),
  unserved("POST", `/volumes`, "Creating a volume"),
  unserved("GET", `/volumes/(${SEG})`, "Getting a volume"),
  unserved("DELETE", `/volumes/(${SEG})`, "Deleting a volume"),
  ...["GET", "POST", "PUT", "PATCH", "DELETE"].map((m) => unserved(m, `/volumecontent/(${SEG})/(dir|path|file)`, "Volume content", { public: true })),
];
