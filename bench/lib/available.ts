import { Code, ConnectError } from "@connectrpc/connect";
import { cachedBaseRootfs } from "../../src/sandboxd/images/base.js";
import { sandboxSkipReason } from "../../test/sandboxd/helpers/sandboxd.js";
import type { BenchContext } from "./types.js";

/** Thrown when the daemon does not implement what a scenario needs; the scenario shows "not available". */
export class NotAvailable extends Error {
  override readonly name = "NotAvailable";
}

/** Whether `err` says the feature is missing: Connect `unimplemented`, HTTP 501, or NotAvailable. */
export function isUnavailable(err: unknown): boolean {
  if (err instanceof NotAvailable) return true;
  if (err instanceof ConnectError) return err.code === Code.Unimplemented;
  return false;
}

/** Throws NotAvailable for a 501 response; otherwise returns the response unchanged. */
export function require2xx(res: Response, what: string): Response {
  if (res.status === 501) throw new NotAvailable(`${what}: 501 not implemented`);
  if (res.status < 200 || res.status > 299) throw new Error(`${what}: HTTP ${res.status}`);
  return res;
}

/** Runs an RPC probe; converts `unimplemented` into NotAvailable naming the feature. */
export async function probe<T>(feature: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isUnavailable(err)) throw new NotAvailable(`${feature} is not implemented by the daemon`);
    throw err;
  }
}

/**
 * What a sandboxd scenario needs: root and runc (else NotAvailable, with the reason), and in the
 * quick run, which is a smoke of the scenarios, a base rootfs already built: it never waits
 * minutes there for debootstrap (a full run, or the sandboxd tests, build it once).
 */
export function needSandboxes(ctx: BenchContext): void {
  const skip = sandboxSkipReason();
  if (skip) throw new NotAvailable(skip);
  if (ctx.quick && !cachedBaseRootfs(process.env.SANDBOXD_CACHE_DIR ?? "/var/cache/sandboxd")) {
    throw new NotAvailable("the base rootfs is not built on this machine yet (a full run or the sandboxd tests build it)");
  }
}
