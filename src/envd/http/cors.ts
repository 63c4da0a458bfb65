import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";
import type { AnyResponse } from "./errors.js";

const EXPOSED = ["Grpc-Status", "Grpc-Message", "Grpc-Status-Details-Bin", "Location", "Cache-Control", "X-Content-Type-Options"];

/**
 * Applies the reference's permissive CORS (any origin, reflected headers, 7200 s preflight).
 * Returns true when the request was a preflight and has been answered.
 */
export function applyCors(req: IncomingMessage | Http2ServerRequest, res: AnyResponse): boolean {
  res.setHeader("Access-Control-Allow-Origin", "*");
  res.setHeader("Access-Control-Expose-Headers", EXPOSED.join(", "));
  if (req.method !== "OPTIONS" || !req.headers["access-control-request-method"]) return false;
  res.setHeader("Access-Control-Allow-Methods", "HEAD, GET, POST, PUT, PATCH, DELETE");
  const asked = req.headers["access-control-request-headers"];
  if (asked) res.setHeader("Access-Control-Allow-Headers", String(asked));
  res.setHeader("Access-Control-Max-Age", "7200");
  res.statusCode = 204;
  res.end();
  return true;
}
