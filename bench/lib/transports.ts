import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Filesystem } from "../../src/envd/gen/filesystem/filesystem_pb.js";
import { Process } from "../../src/envd/gen/process/process_pb.js";

type Codec = "binary" | "json" | "binaryGzip";

/** Clients for both services over the transports the bench measures. */
export interface BenchClients {
  fs: Record<Codec, Client<typeof Filesystem>>;
  proc: Record<Codec, Client<typeof Process>>;
}

/**
 * Connect clients as the bench measures them: binary over h2c and JSON over HTTP/1.1, both
 * without response compression (the e2b SDK's connect-web transport asks for none), plus
 * binary with gzip as connect-node asks for it by default (the test helpers' clients).
 */
export function benchTransports(baseUrl: string, http1Url = baseUrl): BenchClients {
  const transports = {
    binary: createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: true, acceptCompression: [] }),
    json: createConnectTransport({ baseUrl: http1Url, httpVersion: "1.1", useBinaryFormat: false, acceptCompression: [] }),
    binaryGzip: createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: true }),
  };
  const codecs = Object.keys(transports) as Codec[];
  return {
    fs: Object.fromEntries(codecs.map((k) => [k, createClient(Filesystem, transports[k])])) as BenchClients["fs"],
    proc: Object.fromEntries(codecs.map((k) => [k, createClient(Process, transports[k])])) as BenchClients["proc"],
  };
}
