/**
 * Bounded reads of envd's answers. envd runs inside the sandbox, and sandbox root can replace it
 * (kill it, listen on its port): its bodies are hostile, so sandboxd never holds more of one than
 * it needs, whatever length is announced or streamed.
 */

/** Reads a fetch body up to `max` bytes; the rest is not read (the body is cancelled). */
export async function readPrefix(res: Response, max: number): Promise<{ bytes: Buffer; truncated: boolean }> {
  if (!res.body) return { bytes: Buffer.alloc(0), truncated: false };
  const reader = res.body.getReader();
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return { bytes: Buffer.concat(chunks, size), truncated: false };
      const room = max - size;
      chunks.push(Buffer.from(value.buffer, value.byteOffset, Math.min(room, value.byteLength)));
      size += Math.min(room, value.byteLength);
      if (value.byteLength > room) return { bytes: Buffer.concat(chunks, size), truncated: true };
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

/** The start of a body as text for an error message (at most `max` bytes read, `limit` characters kept). */
export async function textPrefix(res: Response, max = 4096, limit = 200): Promise<string> {
  const { bytes } = await readPrefix(res, max);
  return bytes.toString("utf8").slice(0, limit);
}

/** An answer from envd that breaks its protocol or bounds: retrying will not make it right. */
export class EnvdProtocolError extends Error {
  override readonly name = "EnvdProtocolError";
}
