// Reading the logs first-command.ts breaks a create down by: sandboxd's JSON lines and envd's
// access log in a sandbox's console output.

/** One JSON log line. */
export type Line = Record<string, unknown>;

/** The JSON lines of a log text (other lines skipped). */
export function jsonLines(text: string): Line[] {
  const out: Line[] = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      out.push(JSON.parse(line) as Line);
    } catch {
      // not a log line
    }
  }
  return out;
}

/** The first line with this message about this sandbox. */
export function firstLine(lines: Line[], msg: string, sandboxID: string): Line | undefined {
  return lines.find((l) => l.msg === msg && l.sandboxID === sandboxID);
}

/**
 * envd's time on the claim's /init and on the Starts after it (its access log: request to the
 * answer's end, ms). A pooled sandbox logs /init, the pool's warm-up Start, then the claim's /init.
 */
export function envdRequests(consoleText: string): { init: number | null; starts: number[] } {
  const reqs = jsonLines(consoleText).filter((l) => l.msg === "request" && typeof l.ms === "number");
  let last = -1;
  reqs.forEach((l, i) => {
    if (l.path === "/init") last = i;
  });
  const init = last >= 0 ? (reqs[last].ms as number) : null;
  const starts = reqs.slice(last + 1).filter((l) => l.path === "/process.Process/Start").map((l) => l.ms as number);
  return { init, starts };
}
