// The direct path of a Connect server stream: a service's StreamCall implementation
// (stream/contract.ts) answered straight from the Node request, without connect-es's layers.
import type { ConnectError, ContextValues } from "@connectrpc/connect";
import { contentTypeStreamJson, contentTypeStreamProto } from "@connectrpc/connect/protocol-connect";
import type { User } from "../auth/users.js";
import { flushedKey, type DirectStream, type Frame } from "../stream/contract.js";
import { rpcError } from "./errors.js";
import { codeName, recordKey } from "./interceptors.js";
import { CLIENT_GONE, CallSignal, answerSink, drained, header, type Req, type Res } from "./node-call.js";

/** A method served by `serveDirect`: its implementation and the codec pieces it needs. */
export interface DirectMethod {
  impl: DirectStream;
  /** The request message from its envelope's payload (connect-es's parser and its errors). */
  parse(binary: boolean, payload: Uint8Array): unknown;
  /** One response message as frame pieces. */
  frame(message: unknown, binary: boolean): Frame;
  /** The end-of-stream frame, with the error if the call failed. */
  end(error: ConnectError | undefined): Uint8Array;
}

/** The Basic-auth user of a request (what the identity interceptor resolves); throws unauthenticated. */
export type UserOf = (authorization: string | undefined) => User | undefined;

/**
 * Answers a Connect server stream (one plain request envelope already read, uncompressed
 * response) by calling its implementation directly: what the interceptors do for such a call
 * (the access-log record, the Basic user) is done here, and the messages go from the
 * implementation's iterator to the response with nothing in between. The generic path (an
 * interceptor chain, a HandlerContext with three Headers objects, four generator layers per
 * message) cost about as much per Start as the spawn. The answer is the same: status 200 and
 * the content type once the first message (or the error) is ready, one frame per message, then
 * the end-of-stream frame with the error if any; compared with connect-node's answers by
 * test/fast-paths.test.ts.
 */
export async function serveDirect(req: Req, res: Res, values: ContextValues, method: DirectMethod, userOf: UserOf, binary: boolean, payload: Uint8Array, timeoutMs: number | undefined, shutdown: AbortSignal | undefined): Promise<void> {
  const rec = values.get(recordKey);
  if (rec) rec.procedure = req.url;
  const flushed = values.get(flushedKey);
  const call = new CallSignal(timeoutMs, shutdown);
  let open = true;
  res.once("close", () => {
    open = false;
    if (!res.writableFinished) call.abort(CLIENT_GONE);
  });
  // A write to a response whose client left fails; the 'close' above ends the loop instead.
  res.on("error", () => undefined);
  const sink = answerSink(req, res);
  let headSent = false;
  const head = (): void => {
    if (headSent) return;
    headSent = true;
    sink.head(200, { "content-type": binary ? contentTypeStreamProto : contentTypeStreamJson });
  };
  let it: AsyncIterator<unknown> | undefined;
  let failure: unknown;
  let unsettled: (() => void)[] = [];
  try {
    const user = userOf(header(req, "authorization") ?? undefined);
    const message = method.parse(binary, payload);
    it = method.impl(message, { signal: call.signal, header: (name) => header(req, name), user })[Symbol.asyncIterator]();
    for (;;) {
      const next = await it.next();
      if (!open || next.done === true) break;
      const { pieces, written, last } = method.frame(next.value, binary);
      head();
      for (const piece of pieces) {
        if (sink.write(piece) || (await drained(sink.events))) continue;
        open = false; // closed or failed before draining: nobody is left to answer
        break;
      }
      if (!open) break;
      // A frame's `written` waits until everything so far reached the kernel.
      if (written && flushed) unsettled.push(written);
      if (unsettled.length > 0 && flushed!()) {
        const settle = unsettled;
        unsettled = [];
        for (const w of settle) w();
      }
      // Nothing follows it (a process's end event): the answer ends now, in the same write.
      if (last) break;
    }
  } catch (e) {
    failure = e;
  }
  if (open) {
    if (failure !== undefined && rec) rec.code = codeName(failure);
    head();
    sink.end(method.end(failure === undefined ? undefined : rpcError(failure)));
  }
  // Once the answer is out: leaving early closes the implementation's iterator, so its `finally`
  // blocks run (and drop their abort listeners); then the call ends.
  await it?.return?.().catch(() => undefined);
  call.abort(failure);
}
