import type { ConnectRouterOptions, ContextValues } from "@connectrpc/connect";
import { compressionNegotiate, validateUniversalHandlerOptions } from "@connectrpc/connect/protocol";
import {
  contentTypeStreamJson,
  contentTypeStreamProto,
  headerContentType,
  headerStreamAcceptEncoding,
  headerStreamEncoding,
  headerTimeout,
  parseContentType,
  parseTimeout,
} from "@connectrpc/connect/protocol-connect";
import type { FramedMethod } from "./framed-stream.js";
import { serveDirect, type UserOf } from "./direct-stream.js";
import { CLIENT_GONE, answerSink, bodyChunks, callContext, drained, header, iterate, nodeHeaders, webHeaders, type CallContext, type Req, type Res } from "./node-call.js";

type Options = ConnectRouterOptions & ReturnType<typeof validateUniversalHandlerOptions>;

/**
 * Serves a framed server-streaming call (framed-stream.ts) of the Connect protocol straight from
 * the Node request and response: POST, `application/connect+proto` or `+json`, a request and a
 * response without compression. Returns false, having touched nothing, for every other request,
 * which connect-node then serves (gRPC, gRPC-Web, compressed, malformed headers). The call's
 * body is framed-stream's, as on connect-node's path; what is skipped is connect-node's request
 * and response plumbing (a universal request object, an async iterable over the request, a
 * promise and two listeners per written piece).
 */
export function createFastStream(options: ConnectRouterOptions, calls: Map<string, FramedMethod>, contextValues: (req: Req) => ContextValues, userOf: UserOf): (req: Req, res: Res) => boolean {
  const opt: Options = { ...options, ...validateUniversalHandlerOptions(options) };
  return (req, res) => {
    if (req.method !== "POST") return false;
    const method = calls.get(req.url ?? "");
    if (!method) return false;
    const type = parseContentType(header(req, headerContentType));
    if (type === undefined || !type.stream) return false;
    const encoding = header(req, headerStreamEncoding);
    if (encoding !== null && encoding !== "identity") return false;
    const compression = compressionNegotiate(opt.acceptCompression, null, header(req, headerStreamAcceptEncoding), headerStreamAcceptEncoding);
    if (compression.response || compression.error) return false;
    const timeout = parseTimeout(header(req, headerTimeout), opt.maxTimeoutMs);
    if (timeout.error) return false;
    // Errors of the call end its stream inside; one here (a failed write) leaves nothing to answer.
    stream(req, res, contextValues(req), method, type.binary, timeout.timeoutMs, opt, userOf).catch(() => res.destroy());
    return true;
  };
}

async function stream(req: Req, res: Res, values: ContextValues, method: FramedMethod, binary: boolean, timeoutMs: number | undefined, opt: Options, userOf: UserOf): Promise<void> {
  if (!method.direct) return framed(req, res, values, method, binary, timeoutMs, opt, null);
  const chunks = await bodyChunks(req, opt.readMaxBytes + 5);
  const payload = plainPayload(chunks, opt.readMaxBytes);
  if (payload) return serveDirect(req, res, values, method.direct, userOf, binary, payload, timeoutMs, opt.shutdownSignal);
  return framed(req, res, values, method, binary, timeoutMs, opt, chunks);
}

/** The call through framed-stream's body; `chunks`: the request body when already read. */
async function framed(req: Req, res: Res, values: ContextValues, method: FramedMethod, binary: boolean, timeoutMs: number | undefined, opt: Options, chunks: Buffer[] | null): Promise<void> {
  const contentType = binary ? contentTypeStreamProto : contentTypeStreamJson;
  const context = callContext(method.spec, webHeaders(req), req.url ?? "/", timeoutMs, opt.shutdownSignal, values, contentType);
  let open = true;
  res.once("close", () => {
    open = false;
    if (!res.writableFinished) context.abort(CLIENT_GONE);
  });
  // A write to a response whose client left fails; the 'close' above ends the loop instead.
  res.on("error", () => undefined);
  const body = callBody(chunks ?? (await bodyChunks(req, opt.readMaxBytes + 5)), context, method, binary, opt.readMaxBytes);
  const sink = answerSink(req, res);
  try {
    let next = await body.next();
    if (!open) return;
    // Sent once the first frame is ready: until then the implementation may still set headers.
    sink.head(200, nodeHeaders(context.responseHeader));
    for (; next.done !== true; next = await body.next()) {
      if (!open) return;
      if (!sink.write(next.value) && !(await drained(sink.events))) return;
    }
    sink.end();
  } finally {
    // Leaving early closes the implementation's generator, so its `finally` blocks run.
    await body.return(undefined);
  }
}

/** The payload of a body that is exactly one plain envelope within the limit, else undefined. */
function plainPayload(chunks: Buffer[], max: number): Uint8Array | undefined {
  const bytes = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
  const length = bytes.length >= 5 ? bytes.readUInt32BE(1) : -1;
  return bytes[0] === 0 && length <= max && bytes.length === 5 + length ? bytes.subarray(5) : undefined;
}

/**
 * The call's response body: a body of exactly one plain envelope within the limit has its
 * payload parsed directly; anything else (several envelopes, flags, an oversized or cut-off
 * message) goes through connect-es's envelope transforms, which word the error as connect-node
 * would.
 */
function callBody(chunks: Buffer[], context: CallContext, method: FramedMethod, binary: boolean, max: number): AsyncGenerator<Uint8Array> {
  const payload = plainPayload(chunks, max);
  if (payload) return method.callWithPayload(context, binary, payload);
  return method.call(context, binary, iterate(chunks), null);
}
