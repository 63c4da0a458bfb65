import type { DescService } from "@bufbuild/protobuf";
import { createServiceImplSpec, type ConnectRouterOptions, type ContextValues, type ServiceImpl } from "@connectrpc/connect";
import {
  compressionNegotiate,
  createMethodSerializationLookup,
  invokeUnaryImplementation,
  readAllBytes,
  validateUniversalHandlerOptions,
} from "@connectrpc/connect/protocol";
import {
  codeToHttpStatus,
  contentTypeUnaryJson,
  contentTypeUnaryProto,
  errorToJsonBytes,
  headerContentType,
  headerTimeout,
  headerUnaryAcceptEncoding,
  headerUnaryContentLength,
  headerUnaryEncoding,
  parseContentType,
  parseTimeout,
  trailerMux,
} from "@connectrpc/connect/protocol-connect";
import { rpcError } from "./errors.js";
import { CLIENT_GONE, bodyChunks, callContext, iterate, header, nodeHeaders, sendWhole, webHeaders, type Req, type Res } from "./node-call.js";

export type Options = ConnectRouterOptions & ReturnType<typeof validateUniversalHandlerOptions>;
type UnarySpec = Parameters<typeof invokeUnaryImplementation>[0];
type Serialization = ReturnType<typeof createMethodSerializationLookup>;

/** A registered service and its implementation (typed together by `serviceEntry`). */
export interface ServiceEntry {
  service: DescService;
  impl: Partial<ServiceImpl<DescService>>;
}

/** Pairs a service with its implementation, checked against each other. */
export function serviceEntry<S extends DescService>(service: S, impl: Partial<ServiceImpl<S>>): ServiceEntry {
  return { service, impl: impl as Partial<ServiceImpl<DescService>> };
}

interface UnaryMethod {
  spec: UnarySpec;
  serialization: Serialization;
}

/**
 * Answers a Connect unary call (POST, `application/proto` or `application/json`, uncompressed
 * request) straight from the Node request and response; returns false, having touched nothing,
 * for every other request, which connect-node then serves. The steps and their errors are
 * connect-es's own (its unary handler's building blocks: content type, timeout, body limits,
 * parsing, interceptors, error JSON, response compression, trailers as `trailer-` headers);
 * what is skipped is connect-node's generic request and response plumbing (a web Request-like
 * object, async iterables for both bodies, a generator pipeline), which cost about 1 ms of CPU
 * per call on a slow core: more than the work of a Stat.
 */
export function createFastUnary(options: ConnectRouterOptions, services: ServiceEntry[], contextValues: (req: Req) => ContextValues): (req: Req, res: Res) => boolean {
  const opt: Options = { ...options, ...validateUniversalHandlerOptions(options) };
  const methods = new Map<string, UnaryMethod>();
  for (const { service, impl } of services) {
    for (const spec of Object.values(createServiceImplSpec(service, impl).methods)) {
      if (spec.kind !== "unary") continue;
      methods.set(`/${service.typeName}/${spec.method.name}`, {
        spec: spec as UnarySpec,
        serialization: createMethodSerializationLookup(spec.method, opt.binaryOptions, opt.jsonOptions, opt),
      });
    }
  }

  return (req, res) => {
    if (req.method !== "POST") return false;
    const method = methods.get(req.url ?? "");
    if (!method) return false;
    const type = parseContentType(header(req, headerContentType));
    if (type === undefined || type.stream) return false;
    const encoding = header(req, headerUnaryEncoding);
    if (encoding !== null && encoding !== "identity") return false;
    const timeout = parseTimeout(header(req, headerTimeout), opt.maxTimeoutMs);
    if (timeout.error) return false;
    const length = header(req, headerUnaryContentLength);
    if (length !== null && !(Number(length) <= opt.readMaxBytes)) return false;
    // Errors of the call are answered inside; one here (a failed write) leaves nothing to answer.
    serve(req, res, contextValues(req), method, type.binary, timeout.timeoutMs, opt).catch(() => res.destroy());
    return true;
  };
}

async function serve(req: Req, res: Res, values: ContextValues, method: UnaryMethod, binary: boolean, timeoutMs: number | undefined, opt: Options): Promise<void> {
  const { spec, serialization } = method;
  const requestHeader = webHeaders(req);
  const context = callContext(spec, requestHeader, req.url ?? "/", timeoutMs, opt.shutdownSignal, values, binary ? contentTypeUnaryProto : contentTypeUnaryJson);
  res.once("close", () => {
    if (!res.writableFinished) context.abort(CLIENT_GONE);
  });
  const compression = compressionNegotiate(opt.acceptCompression, null, requestHeader.get(headerUnaryAcceptEncoding), headerUnaryAcceptEncoding);
  let status = 200;
  let body: Uint8Array;
  try {
    const bytes = await readAllBytes(iterate(await bodyChunks(req, opt.readMaxBytes)), opt.readMaxBytes, requestHeader.get(headerUnaryContentLength));
    const input = serialization.getI(binary).parse(bytes);
    const output = await invokeUnaryImplementation(spec, context, input, opt.interceptors ?? []);
    body = serialization.getO(binary).serialize(output);
  } catch (e) {
    context.abort(e);
    const error = rpcError(e);
    status = codeToHttpStatus(error.code);
    context.responseHeader.set(headerContentType, contentTypeUnaryJson);
    error.metadata.forEach((value, key) => context.responseHeader.set(key, value));
    body = errorToJsonBytes(error, opt.jsonOptions);
  } finally {
    context.abort();
  }
  if (compression.response && body.byteLength >= opt.compressMinBytes) {
    body = await compression.response.compress(body);
    context.responseHeader.set(headerUnaryEncoding, compression.response.name);
  }
  const out = trailerMux(context.responseHeader, context.responseTrailer);
  out.set(headerUnaryContentLength, String(body.byteLength));
  if (res.destroyed) return;
  sendWhole(req, res, status, nodeHeaders(out), body);
}

