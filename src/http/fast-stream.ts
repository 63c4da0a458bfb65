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
import { CLIENT_GONE, answerSink, bodyChunks, callContext, header, iterate, nodeHeaders, webHeaders, type CallContext, type Req, type Res } from "./node-call.js";

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
export function createFastStream(options: ConnectRouterOptions, calls: Map<string, FramedMethod>, contextValues: (req: Req) => ContextValues): (req: Req, res: Res) => boolean {
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
    stream(req, res, contextValues(req), method, type.binary, timeout.timeoutMs, opt).catch(() => res.destroy());
    return true;
  };
}

async function stream(req: Req, res: Res, values: ContextValues, method: FramedMethod, binary: boolean, timeoutMs: number | undefined, opt: Options): Promise<void> {
  const contentType = binary ? contentTypeStreamProto : contentTypeStreamJson;
  const context = callContext(method.spec, webHeaders(req), req.url ?? "/", timeoutMs, opt.shutdownSignal, values, contentType);
  let open = true;
  res.once("close", () => {
    open = false;
    if (!res.writableFinished) context.abort(CLIENT_GONE);
  });
  // A write to a response whose client left fails; the 'close' above ends the loop instead.
  res.on("error", () => undefined);
  const body = await callBody(req, context, method, binary, opt.readMaxBytes);
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

/**
 * The call's response body, once its request body is read: a body of exactly one plain envelope
 * within the limit has its payload parsed directly; anything else (several envelopes, flags,
 * an oversized or cut-off message) goes through connect-es's envelope transforms, which word
 * the error as connect-node would.
 */
async function callBody(req: Req, context: CallContext, method: FramedMethod, binary: boolean, max: number): Promise<AsyncGenerator<Uint8Array>> {
  const chunks = await bodyChunks(req, max + 5);
  const bytes = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
  const length = bytes.length >= 5 ? bytes.readUInt32BE(1) : -1;
  if (bytes[0] === 0 && length <= max && bytes.length === 5 + length) return method.callWithPayload(context, binary, bytes.subarray(5));
  return method.call(context, binary, iterate(chunks), null);
}

/** Resolves true once `res` drained, false if it closed or failed first. */
function drained(res: NodeJS.EventEmitter): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (ok: boolean) => () => {
      res.off("drain", onDrain);
      res.off("close", onClose);
      resolve(ok);
    };
    const onDrain = done(true);
    const onClose = done(false);
    res.once("drain", onDrain);
    res.once("close", onClose);
  });
}
