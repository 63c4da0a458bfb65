import { chownSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient, type Client, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { Filesystem } from "../../../src/envd/gen/filesystem/filesystem_pb.js";
import { Process } from "../../../src/envd/gen/process/process_pb.js";

/** The four transports every service is tested through. */
export function transports(baseUrl: string): Record<"json" | "binary" | "grpc" | "grpcWeb", Transport> {
  return {
    json: createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false }),
    // No response compression, as the e2b SDKs ask: binary streams take the hand-written frame
    // path; `json` accepts gzip (connect-node's default) and so covers connect-es's own pipeline.
    binary: createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: true, acceptCompression: [] }),
    grpc: createGrpcTransport({ baseUrl }),
    grpcWeb: createGrpcWebTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: true }),
  };
}

type Kinds = "json" | "binary" | "grpc" | "grpcWeb";

/** connect-node clients for both services over each transport. */
export interface Clients {
  fs: Record<Kinds, Client<typeof Filesystem>>;
  proc: Record<Kinds, Client<typeof Process>>;
}

/** Builds connect-node clients for both services on every transport. */
export function clients(baseUrl: string): Clients {
  const t = transports(baseUrl);
  const kinds = Object.keys(t) as Kinds[];
  return {
    fs: Object.fromEntries(kinds.map((k) => [k, createClient(Filesystem, t[k])])) as Clients["fs"],
    proc: Object.fromEntries(kinds.map((k) => [k, createClient(Process, t[k])])) as Clients["proc"],
  };
}

/** `Authorization: Basic base64("<user>:")` as the SDK sends it. */
export function basicAuth(user: string): Record<string, string> {
  return { authorization: "Basic " + Buffer.from(`${user}:`).toString("base64") };
}

/** A temp dir under /tmp owned by `user` (uid 1001 on the test host); cleanup() removes it. */
export async function tempDir(name: string): Promise<{ path: string; cleanup(): void }> {
  const path = mkdtempSync(join(tmpdir(), `envd-${name}-`));
  try {
    chownSync(path, 1001, 1001);
  } catch {
    // no such user on this machine: the dir stays root-owned
  }
  return { path, cleanup: () => rmSync(path, { recursive: true, force: true }) };
}

/** The published e2b SDK in debug mode, pointed at the daemon. */
export async function sdkSandbox(url: string, opts: { envdAccessToken?: string } = {}) {
  process.env.E2B_DEBUG = "true";
  process.env.E2B_SANDBOX_URL = url;
  const { Sandbox } = await import("e2b");
  if (!opts.envdAccessToken) return Sandbox.create({ debug: true, sandboxUrl: url });
  // A secured sandbox: the SDK's own constructor (public, marked internal) is how it builds one.
  return new Sandbox({ sandboxId: "debug_sandbox_id", envdVersion: "99.99.99", envdAccessToken: opts.envdAccessToken, debug: true, sandboxUrl: url });
}
