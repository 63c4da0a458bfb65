import { Code, ConnectError } from "@connectrpc/connect";

/**
 * Words a Node fs error the way Go's *PathError / *LinkError print: `<op> <path>: <description>`
 * (e.g. "lstat /x: no such file or directory"), so our messages read like the reference's.
 */
export function goError(err: unknown): string {
  const e = err as NodeJS.ErrnoException & { dest?: string };
  if (!e || typeof e !== "object" || !e.syscall) return err instanceof Error ? err.message : String(err);
  const m = /^[A-Z0-9_]+: ([^,]+)/.exec(e.message ?? "");
  const description = (m ? m[1] : (e.code ?? "error")).toLowerCase();
  const paths = [e.path, e.dest].filter((p): p is string => typeof p === "string");
  return [e.syscall, ...paths].join(" ") + ": " + description;
}

/**
 * A filesystem failure as `<context>: <go-style error>`. The reference answers `internal` for
 * these; a name that is too long is the caller's mistake (invalid_argument) and a full disk
 * is resource_exhausted, so those two are told apart.
 */
export function fsError(context: string, err: unknown, fallback: Code = Code.Internal): ConnectError {
  const errno = (err as NodeJS.ErrnoException)?.code;
  const code =
    errno === "ENAMETOOLONG" ? Code.InvalidArgument : errno === "ENOSPC" || errno === "EDQUOT" ? Code.ResourceExhausted : fallback;
  return new ConnectError(`${context}: ${goError(err)}`, code, undefined, undefined, err);
}
