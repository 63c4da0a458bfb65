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
