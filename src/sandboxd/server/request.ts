/** The request and response types the listener hands to the API, the proxy and the dashboard. */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";

/** Either protocol's request, as the listener hands it over. */
export type AnyRequest = IncomingMessage | Http2ServerRequest;

/** Either protocol's response, as the listener hands it over. */
export type AnyResponse = ServerResponse | Http2ServerResponse;
