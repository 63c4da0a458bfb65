import type { Compression } from "@connectrpc/connect/protocol";
import { compressionGzip } from "@connectrpc/connect-node";
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import { compressible, GZIP_LEVEL } from "../files/adaptive-gzip.js";

const gzipAsync = promisify(gzip);

/**
 * Connect's gzip with the effort of downloads: a message whose first bytes a level-1 trial does
 * not shrink (process output of binary data, already-compressed bytes) is framed as stored
 * blocks (level 0: a copy and a CRC), any other is deflated at the downloads' level. Requests
 * are decompressed as connect-node does.
 */
export const adaptiveCompressionGzip: Compression = {
  name: "gzip",
  async compress(bytes: Uint8Array): Promise<Uint8Array<ArrayBuffer>> {
    const data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    // zlib's results are fresh buffers of their own, never on a SharedArrayBuffer.
    return (await gzipAsync(data, { level: compressible(data) ? GZIP_LEVEL : 0 })) as Uint8Array<ArrayBuffer>;
  },
  decompress: compressionGzip.decompress,
};
