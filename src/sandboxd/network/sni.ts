/** What the first bytes of a connection say about the name it is for. */
export type Peek = { done: true; name: string | undefined } | { done: false };

/**
 * The server name of a TLS ClientHello (the SNI extension) from the bytes received so far:
 * not done while the record is incomplete, name undefined when it is not a ClientHello or has no
 * SNI. Only the first record is read (a ClientHello split across records is refused).
 */
export function peekSni(buf: Buffer): Peek {
  if (buf.length < 5) return { done: false };
  if (buf[0] !== 0x16) return { done: true, name: undefined };
  const recordLen = buf.readUInt16BE(3);
  if (buf.length < 5 + recordLen) return { done: false };
  const b = buf.subarray(5, 5 + recordLen);
  try {
    if (b[0] !== 0x01) return { done: true, name: undefined };
    let o = 4 + 2 + 32; // handshake header, version, random
    o += 1 + b[o]; // session id
    o += 2 + b.readUInt16BE(o); // cipher suites
    o += 1 + b[o]; // compression methods
    const extEnd = o + 2 + b.readUInt16BE(o);
    o += 2;
    while (o + 4 <= extEnd) {
      const type = b.readUInt16BE(o);
      const len = b.readUInt16BE(o + 2);
      o += 4;
      if (type === 0) {
        // server_name_list: u16 length, then (u8 type, u16 length, name)*
        let p = o + 2;
        while (p + 3 <= o + len) {
          const nameType = b[p];
          const nameLen = b.readUInt16BE(p + 1);
          if (nameType === 0) return { done: true, name: b.subarray(p + 3, p + 3 + nameLen).toString("ascii") };
          p += 3 + nameLen;
        }
        return { done: true, name: undefined };
      }
      o += len;
    }
  } catch {
    // a malformed hello: no name
  }
  return { done: true, name: undefined };
}

/**
 * The Host of an HTTP/1.x request head from the bytes received so far (without a port): not
 * done until the head is complete; name undefined when there is no Host header.
 */
export function peekHttpHost(buf: Buffer): Peek {
  const end = buf.indexOf("\r\n\r\n");
  if (end < 0) return { done: false };
  const head = buf.subarray(0, end).toString("latin1");
  const m = /\r\nhost:[ \t]*([^\r\n]*)/i.exec(head);
  if (!m) return { done: true, name: undefined };
  const host = m[1].trim();
  const name = host.startsWith("[") ? host.slice(1, host.indexOf("]")) : host.replace(/:\d*$/, "");
  return { done: true, name: name || undefined };
}
