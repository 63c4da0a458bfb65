/** What sandboxd asks of a tool run and what it gets back, whichever way the tool is started. */

/** One tool to run. */
export interface SpawnRequest {
  cmd: string;
  args: string[];
  cwd?: string;
  /** Written to the tool's stdin, then closed (with `fds`, stdin is /dev/null instead). */
  input?: string;
  timeoutMs: number;
  /** Lowers the tool's priority to this niceness as soon as it runs. */
  nice?: number;
  /** The tool's stdout and stderr go to these descriptors (kept open by the caller); the run ends at its exit. */
  fds?: [number, number];
}

/** How a tool ended and what it printed (the last 1 MB of stdout, 64 KB of stderr). */
export interface SpawnResult {
  code: number | null;
  stdout: string;
  stderr: string;
}
