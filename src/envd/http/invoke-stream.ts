// A server-streaming method's implementation called through the router's interceptors, for
// framed-stream.ts: what connect-es's invokeStreamImplementation does, minus its generator layers.
import {
  Code,
  ConnectError,
  type HandlerContext,
  type Interceptor,
  type StreamRequest,
  type StreamResponse,
} from "@connectrpc/connect";
import type { createHandlerFactory as connectFactory } from "@connectrpc/connect/protocol-connect";

/** What connect-es gives a protocol's handler factory for one method. */
export type MethodSpec = Parameters<ReturnType<typeof connectFactory>>[0];

export type ServerStreamSpec = MethodSpec & {
  kind: "server_streaming";
  impl: (req: unknown, ctx: HandlerContext) => AsyncIterable<unknown>;
};

/** What the interceptors and the implementation answered: headers, trailers and the messages. */
export interface InvokedStream {
  header: Headers;
  trailer: Headers;
  message: AsyncIterable<unknown>;
}

/**
 * connect-es's invokeStreamImplementation for a server-streaming method, without its
 * generator layers: the interceptors run as there (same request and response shapes), and the
 * implementation's messages are read as it yields them. connect-es wraps them in two
 * down-levelled async generators, each costing every message another round of promises.
 */
export async function invokeServerStream(spec: ServerStreamSpec, context: HandlerContext, input: AsyncIterable<unknown>, interceptors: Interceptor[]): Promise<InvokedStream> {
  const service = spec.method.parent;
  const common = { service, method: spec.method, header: context.responseHeader, trailer: context.responseTrailer };
  const impl = async (req: StreamRequest): Promise<StreamResponse> => ({
    ...common,
    stream: true,
    message: spec.impl(await single(req.message), { ...context, service: req.service, requestHeader: req.header, signal: req.signal, values: req.contextValues }),
  } as StreamResponse);
  let next = impl as (req: StreamRequest) => Promise<StreamResponse>;
  for (const i of [...interceptors].reverse()) next = i(next as never) as never;
  return next({
    stream: true,
    service,
    method: spec.method,
    requestMethod: context.requestMethod,
    url: context.url,
    signal: context.signal,
    header: context.requestHeader,
    contextValues: context.values,
    message: input,
  } as StreamRequest);
}

/** The one request message of a server-streaming call (protocol errors as connect-es words them). */
async function single(messages: AsyncIterable<unknown>): Promise<unknown> {
  const it = messages[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done === true) throw new ConnectError("protocol error: missing input message for server-streaming method", Code.Unimplemented);
  const second = await it.next();
  if (second.done !== true) throw new ConnectError("protocol error: received extra input message for server-streaming method", Code.Unimplemented);
  return first.value;
}

export function copyHeaders(from: Headers, to: Headers): void {
  if (from !== to) from.forEach((value, key) => to.set(key, value));
}
