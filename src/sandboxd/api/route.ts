/** The shape of the control API's routes: what a table entry is and what its handler is given. */
import type { Metrics } from "../metrics/service.js";
import type { SandboxService } from "../sandboxes/service.js";
import type { AnyRequest, AnyResponse } from "../server/request.js";
import type { Store } from "../store/store.js";
import type { TemplateService } from "../templates/service.js";

/** Who a request is: its team and, when it came with an API key, that key (GET /teams hands it back). */
export interface Caller {
  teamID: string;
  apiKey?: string;
}

/** What a route's handler gets: the team the key belongs to, the path's ID and the query. */
export interface RouteContext {
  req: AnyRequest;
  res: AnyResponse;
  teamID: string;
  /** The credential the request authenticated with ({teamID: ""} on public routes). */
  caller: Caller;
  /** The path's sandbox ID after ShortID ("" on routes without one). */
  id: string;
  /** The path's template alias or team ID, as sent (routes with `param: "alias"` only). */
  alias: string;
  query: URLSearchParams;
  /** Every group of the path, percent-decoded (routes with `param: "raw"`). */
  params: string[];
  sandboxes: SandboxService;
  store: Store;
  /** Metrics collection, when the server runs it. */
  metrics?: Metrics;
  templates: TemplateService;
}

/** One route: method, path pattern (its one group is the sandbox ID) and handler. */
export interface Route {
  method: string;
  path: RegExp;
  /** What the path's group is: a sandbox ID (through ShortID) unless said otherwise: "alias", the
   * group as sent, decoded (a template alias or a team ID); "raw": see `params`. */
  param?: "alias" | "raw";
  /** Authenticated by the route itself (e.g. a signed URL), not by an API key. */
  public?: boolean;
  handle(ctx: RouteContext): Promise<void> | void;
}
