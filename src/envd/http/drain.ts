import type { IncomingMessage, ServerResponse } from "node:http";
import http2, { type Http2ServerRequest } from "node:http2";

/**
 * What is still read of a request body its answer did not need (a refused upload, a 401, an
 * oversized /init): enough for a client that sends a small body before reading the answer to
 * get it intact, little enough that nobody can hold a connection open by sending forever.
 */
export const DRAIN_MAX_BYTES = 256 * 1024;
export const DRAIN_MAX_MS = 2000;

/**
 * HTTP/1.1: once answered, the rest of the body is read and discarded (keeping the connection
 * for the next request) up to DRAIN_MAX_BYTES or DRAIN_MAX_MS, then the connection is closed.
 * Node's own discard after an answer has no bound.
 */
export function boundDrainAfterAnswer(req: IncomingMessage, res: ServerResponse): void {
  // Taken now: by 'finish', Node has detached the socket from the request.
  const socket = req.socket;
  res.once("finish", () => {
    if (req.complete || socket.destroyed) return;
    let seen = 0;
    const stop = (): void => {
      clearTimeout(timer);
      req.off("data", onData);
      req.off("end", stop);
      socket.off("close", stop);
    };
    const cut = (): void => {
      stop();
      socket.destroy();
    };
    const onData = (chunk: Buffer): void => {
      seen += chunk.length;
      if (seen > DRAIN_MAX_BYTES && !req.complete) cut();
    };
    // The request may have completed without this listener seeing its 'end' (a body already
    // parsed): the socket then serves the next request and must not be cut.
    const timer = setTimeout(() => (req.complete ? stop() : cut()), DRAIN_MAX_MS);
    req.on("data", onData);
    req.once("end", stop);
    socket.once("close", stop);
    (req as IncomingMessage & { _dumped?: boolean })._dumped = true;
    req.resume();
  });
}

/**
 * HTTP/2 plain answers: once answered, a stream whose body is still coming is reset with
 * NO_ERROR (RFC 9113 §8.1), so the client stops sending and the stream's window is let go.
 */
export function closeStreamAfterAnswer(req: Http2ServerRequest): () => void {
  const stream = req.stream;
  // The stream's own 'finish' (its answer fully sent): the compat response's 'finish' waits for
  // the whole stream to close, which a paused, still-sending client never lets happen.
  const onFinish = (): void => {
    if (!req.complete && !stream.destroyed) setImmediate(() => stream.destroyed || stream.close(http2.constants.NGHTTP2_NO_ERROR));
  };
  stream.once("finish", onFinish);
  return () => stream.off("finish", onFinish);
}
