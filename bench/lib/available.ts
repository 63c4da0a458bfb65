import { Code, ConnectError } from "@connectrpc/connect";

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
