import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";
import type { AnyResponse } from "./errors.js";
import type { Logger } from "./log.js";

/** A request as a plain route sees it (HTTP/1.1 or HTTP/2 compat objects alike). */
export interface RouteRequest {
  readonly req: IncomingMessage | Http2ServerRequest;
  readonly res: AnyResponse;
  readonly url: URL;
  /** Query parameters, decoded with form-urlencoded rules (`+` is a space). */
  readonly query: URLSearchParams;
  readonly log: Logger;
}

/** Handles one plain route; throw HttpError or ConnectError and the one error writer answers. */
export type RouteHandler = (r: RouteRequest) => Promise<void> | void;

/** One entry of the plain-route table. `exempt` routes skip the X-Access-Token gate. */
export interface Route {
  readonly method: "GET" | "POST";
  readonly path: string;
  readonly exempt?: boolean;
  readonly handler: RouteHandler;
}
