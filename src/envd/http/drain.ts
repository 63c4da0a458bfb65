import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest } from "node:http2";

/** HTTP/2's NO_ERROR code (node:http2 itself loads only when a client speaks HTTP/2). */
const NGHTTP2_NO_ERROR = 0;

/**
 * What is still read of a request body its answer did not need (a refused upload, a 401, an
 * oversized /init): enough for a client that sends a small body before reading the answer to
 * get it intact, little enough that nobody can hold a connection open by sending forever.
 */
export const DRAIN_MAX_BYTES = 256 * 1024;
export const DRAIN_MAX_MS = 2000;
const DRAIN_CHECK_MS = 100;

/**
 * HTTP/1.1: once answered, the rest of the body is discarded (Node's parser drops it unread)
 * while the connection stays for the next request, up to DRAIN_MAX_BYTES more read from the
 * socket or DRAIN_MAX_MS; past either, the connection is closed. Node's own discard has no bound.
 */
export function boundDrainAfterAnswer(req: IncomingMessage, res: ServerResponse): void {
  // Taken now: by 'finish', Node has detached the socket from the request.
  const socket = req.socket;
  res.once("finish", () => {
    if (req.complete || socket.destroyed) return;
    const from = socket.bytesRead;
    const started = Date.now();
    // Discarded bytes raise no events: the socket's count is looked at a few times a second.
    const timer = setInterval(() => {
      if (req.complete || socket.destroyed) return clearInterval(timer);
      if (socket.bytesRead - from > DRAIN_MAX_BYTES || Date.now() - started >= DRAIN_MAX_MS) {
        clearInterval(timer);
        socket.destroy();
      }
    }, DRAIN_CHECK_MS);
    (req as IncomingMessage & { _dumped?: boolean })._dumped = true;
    req.resume();
    socket.resume();
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
    if (!req.complete && !stream.destroyed) setImmediate(() => stream.destroyed || stream.close(NGHTTP2_NO_ERROR));
  };
  stream.once("finish", onFinish);
  return () => stream.off("finish", onFinish);
}
