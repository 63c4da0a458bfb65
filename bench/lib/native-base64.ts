// Imported first by the bench entry, before @bufbuild/protobuf loads: gives protobuf-es the
// native base64 it looks for (Uint8Array.prototype.toBase64 / setFromBase64, absent in Node 20),
// backed by Buffer. Only the bench's own client uses it, so decoding JSON output in the client
// does not cap what the daemon is measured at; the daemon gets no such help from here.

type ToBase64 = (this: Uint8Array, opts?: { alphabet?: string; omitPadding?: boolean }) => string;
type SetFromBase64 = (this: Uint8Array, s: string) => { read: number; written: number };
const proto = Uint8Array.prototype as unknown as { toBase64?: ToBase64; setFromBase64?: SetFromBase64 };

if (!proto.toBase64) {
  proto.toBase64 = function (opts) {
    const b = Buffer.from(this.buffer, this.byteOffset, this.byteLength);
    const s = b.toString(opts?.alphabet === "base64url" ? "base64url" : "base64");
    return opts?.omitPadding ? s.replace(/=+$/, "") : s;
  };
}
if (!proto.setFromBase64) {
  proto.setFromBase64 = function (s) {
    // Strict enough for protobuf-es: anything but plain padded base64 falls back to its decoder.
    if (s.length % 4 !== 0 || /[^A-Za-z0-9+/=]/.test(s)) return { read: 0, written: 0 };
    const b = Buffer.from(s, "base64");
    const n = Math.min(b.length, this.length);
    this.set(b.subarray(0, n));
    return { read: s.length, written: n };
  };
}

/** Whether the process has (native or Buffer-backed) base64 for protobuf-es. */
export const nativeBase64 = typeof proto.toBase64 === "function";
