// Registration of a service whose server streams answer with ready frames (stream/contract.ts):
// connect-es's Connect handler with the message serialization replaced by the service's frames.
import { create, isMessage, type DescService, type MessageInitShape } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createHandlerContext,
  createServiceImplSpec,
  type ConnectRouter,
  type ConnectRouterOptions,
  type HandlerContext,
  type ServiceImpl,
} from "@connectrpc/connect";
import {
  compressionNegotiate,
  createMethodSerializationLookup,
  createUniversalServiceHandlers,
  encodeEnvelope,
  pipe,
  transformDecompressEnvelope,
  transformParseEnvelope,
  transformSplitEnvelope,
  untilFirst,
  uResponseMethodNotAllowed,
  uResponseOk,
  uResponseUnsupportedMediaType,
  validateUniversalHandlerOptions,
  type Compression,
  type UniversalHandler,
  type UniversalServerRequest,
  type UniversalServerResponse,
} from "@connectrpc/connect/protocol";
import {
  contentTypeStreamJson,
  contentTypeStreamProto,
  createEndStreamSerialization,
  createHandlerFactory as connectFactory,
  endStreamFlag,
  headerContentType,
  headerStreamAcceptEncoding,
  headerStreamEncoding,
  headerTimeout,
  parseContentType,
  parseTimeout,
} from "@connectrpc/connect/protocol-connect";
import { createHandlerFactory as grpcFactory } from "@connectrpc/connect/protocol-grpc";
import { createHandlerFactory as grpcWebFactory } from "@connectrpc/connect/protocol-grpc-web";
import type { DirectMethod } from "./direct-stream.js";
import { flushedKey, type DirectStreams, type Frame, type FrameEncoder } from "../stream/contract.js";
import { rpcError } from "./errors.js";
import { copyHeaders, invokeServerStream, type InvokedStream, type MethodSpec, type ServerStreamSpec } from "./invoke-stream.js";

/**
 * The encoder of a service without hand-made frames: every message leaves through connect-es's
 * serializer in one envelope, as connect-es itself would send it; what registering the service
 * with it buys is the fast path (fast-stream.ts) for its server streams (WatchDir).
 */
export const serializedFrames: FrameEncoder = () => undefined;

type HandlerFactory = ReturnType<typeof connectFactory>;

/**
 * Registers `service` like `router.service`, except that its server-streaming methods answer
 * uncompressed Connect requests through `encode`: the messages it knows leave as the frame
 * pieces it returns, without protobuf-es and envelope copies. The request side, context,
 * deadlines, interceptors and the end-of-stream frame are connect-es's own building blocks, as
 * in its Connect stream handler; gRPC, gRPC-Web, unary methods and compressed responses are
 * served by connect-es unchanged. (The building blocks are connect-es's "private" exports,
 * hence its exact version pin in package.json.)
 */
export function serviceWithFrames<S extends DescService>(
  router: ConnectRouter,
  options: ConnectRouterOptions,
  service: S,
  impl: Partial<ServiceImpl<S>>,
  encode: FrameEncoder,
  calls?: Map<string, FramedMethod>,
  direct?: DirectStreams,
): void {
  const opt = { ...options, ...validateUniversalHandlerOptions(options) };
  const protocols = [grpcFactory(opt), grpcWebFactory(opt), framedConnectFactory(opt, encode, calls, direct)];
  router.handlers.push(...createUniversalServiceHandlers(createServiceImplSpec(service, impl), protocols));
}

/**
 * A framed server-streaming method: `call` gives the response body (frames) of one call, from
 * its context, its codec, and the request body's bytes (one enveloped message).
 */
export interface FramedMethod {
  spec: ServerStreamSpec;
  call: (context: FramedContext, binary: boolean, body: AsyncIterable<Uint8Array>, compression: Compression | null) => AsyncGenerator<Uint8Array>;
  /** The same call, its request message parsed (when it is read) from the payload of its envelope. */
  callWithPayload: (context: FramedContext, binary: boolean, payload: Uint8Array) => AsyncGenerator<Uint8Array>;
  /** Set for methods with a direct implementation (direct-stream.ts). */
  direct?: DirectMethod;
}

type FramedContext = HandlerContext & { abort(reason?: unknown): void };

function framedConnectFactory(opt: ConnectRouterOptions & ReturnType<typeof validateUniversalHandlerOptions>, encode: FrameEncoder, calls?: Map<string, FramedMethod>, direct?: DirectStreams): HandlerFactory {
  const standard = connectFactory(opt);
  const endStream = createEndStreamSerialization(opt.jsonOptions);
  // The end of a direct stream that ended well (no trailers), built once, at the first use: a
  // Headers object made at start would load undici (~6 MiB of idle RSS).
  let endOk: Uint8Array | undefined;
  const fact = (spec: MethodSpec) => {
    const generic = standard(spec);
    if (spec.kind !== "server_streaming" || opt.requireConnectProtocolHeader) return generic;
    const serialization = createMethodSerializationLookup(spec.method, opt.binaryOptions, opt.jsonOptions, opt);
    const output = spec.method.output;
    // The implementation's messages may be plain objects (normalized here, as connect-es would).
    const toFrame = (m: unknown, binary: boolean): Frame => {
      const hand = encode(m, binary);
      if (hand) return hand;
      const serializer = serialization.getO(binary);
      return { pieces: [encodeEnvelope(0, serializer.serialize((isMessage(m, output) ? m : create(output, m as MessageInitShape<typeof output>)) as Parameters<typeof serializer.serialize>[0]))] };
    };
    const run = (context: FramedContext, binary: boolean, input: AsyncIterable<unknown>): AsyncGenerator<Uint8Array> =>
      frames(() => invokeServerStream(spec as ServerStreamSpec, context, input, opt.interceptors ?? []), context, (m) => toFrame(m, binary), (e) =>
        encodeEnvelope(endStreamFlag, endStream.serialize({ metadata: context.responseTrailer, error: e })),
      );
    const call: FramedMethod["call"] = (context, binary, body, compression) =>
      run(
        context,
        binary,
        pipe(
          body,
          transformSplitEnvelope(opt.readMaxBytes),
          transformDecompressEnvelope(compression, opt.readMaxBytes),
          transformParseEnvelope(serialization.getI(binary), endStreamFlag),
        ),
      );
    // A parse error surfaces where connect-es raises it: when the implementation reads its request.
    const callWithPayload: FramedMethod["callWithPayload"] = (context, binary, payload) =>
      run(context, binary, (async function* () {
        yield serialization.getI(binary).parse(payload);
      })());
    const directImpl = direct?.[spec.method.localName];
    calls?.set(generic.requestPath, {
      spec: spec as ServerStreamSpec,
      call,
      callWithPayload,
      direct: directImpl && {
        impl: directImpl,
        parse: (binary, payload) => serialization.getI(binary).parse(payload),
        frame: toFrame,
        end: (error) => (error ? encodeEnvelope(endStreamFlag, endStream.serialize({ metadata: new Headers(), error })) : (endOk ??= encodeEnvelope(endStreamFlag, endStream.serialize({ metadata: new Headers() })))),
      },
    });

    const handle = async (req: UniversalServerRequest): Promise<UniversalServerResponse> => {
      const type = parseContentType(req.header.get(headerContentType));
      if (type === undefined || !type.stream) return uResponseUnsupportedMediaType;
      if (req.method !== "POST") return uResponseMethodNotAllowed;
      const compression = compressionNegotiate(
        opt.acceptCompression,
        req.header.get(headerStreamEncoding),
        req.header.get(headerStreamAcceptEncoding),
        headerStreamAcceptEncoding,
      );
      // A client that accepts compressed frames gets connect-es's own compressing pipeline.
      if (compression.response) return generic(req);
      const timeout = parseTimeout(req.header.get(headerTimeout), opt.maxTimeoutMs);
      const context = createHandlerContext({
        ...spec,
        service: spec.method.parent,
        requestMethod: req.method,
        protocolName: "connect",
        timeoutMs: timeout.timeoutMs,
        shutdownSignal: opt.shutdownSignal,
        requestSignal: req.signal,
        requestHeader: req.header,
        url: req.url,
        responseHeader: { [headerContentType]: type.binary ? contentTypeStreamProto : contentTypeStreamJson },
        contextValues: req.contextValues,
      });
      if (typeof req.body !== "object" || req.body === null || !(Symbol.asyncIterator in req.body)) {
        throw new ConnectError("expected a byte stream request body", Code.Internal);
      }
      // Header errors surface when the implementation reads its request, as in connect-es.
      const checked = async function* (): AsyncGenerator<Uint8Array> {
        if (compression.error) throw compression.error;
        if (timeout.error) throw timeout.error;
        yield* req.body as AsyncIterable<Uint8Array>;
      };
      const body = call(context, type.binary, checked(), compression.request);
      return { ...uResponseOk, body: await untilFirst(body), header: context.responseHeader };
    };
    return Object.assign(handle, {
      protocolNames: generic.protocolNames,
      supportedContentType: generic.supportedContentType,
      allowedMethods: generic.allowedMethods,
      requestPath: generic.requestPath,
      service: generic.service,
      method: generic.method,
    }) as UniversalHandler;
  };
  return Object.assign(fact, { protocolName: standard.protocolName });
}

/**
 * The response body: each message's frame pieces, then the end-of-stream frame carrying the
 * error (if any) and trailers. Leaving early (client gone, write error) closes the
 * implementation's generator so its `finally` blocks run, and aborts the context.
 *
 * connect-node resumes this generator once a write was accepted, which may still be buffered
 * in the response: `written` callbacks wait until the response reports itself flushed (at the
 * latest after a 'drain', which every frame larger than the stream's buffer waits for). Any
 * still waiting when the stream ends are dropped, never called.
 */
async function* frames(
  invoke: () => Promise<InvokedStream>,
  context: HandlerContext & { abort(reason?: unknown): void },
  toFrame: (message: unknown) => Frame,
  endFrame: (error: ConnectError | undefined) => Uint8Array,
): AsyncGenerator<Uint8Array> {
  let failure: unknown;
  const flushed = context.values.get(flushedKey);
  let unsettled: (() => void)[] = [];
  try {
    const stream = await invoke();
    copyHeaders(stream.header, context.responseHeader);
    for await (const m of stream.message) {
      const { pieces, written } = toFrame(m);
      yield* pieces;
      if (written && flushed) unsettled.push(written);
      if (unsettled.length > 0 && flushed!()) {
        const settle = unsettled;
        unsettled = [];
        for (const w of settle) w();
      }
    }
    copyHeaders(stream.trailer, context.responseTrailer);
  } catch (e) {
    failure = e;
  } finally {
    context.abort(failure);
  }
  yield endFrame(failure === undefined ? undefined : rpcError(failure));
}
