/** A process's stdin pipe as the handle writes to it. */
export interface StdinPort {
  /** False once closed (by CloseStdin or because the pipe broke). */
  readonly writable: boolean;
  /** Writes all of `bytes`; resolves once the kernel took them. */
  write(bytes: Uint8Array): Promise<void>;
  /** Closes the pipe (EOF for the process); idempotent. */
  close(): void;
}

/** A process's terminal (PTY master) as the handle writes to and resizes it. */
export interface TerminalPort {
  write(bytes: Uint8Array): void;
  resize(cols: number, rows: number): void;
}

/** The OS side of a spawned process, piped or on a PTY, as a ProcessHandle drives it. */
export interface ChildIo {
  readonly pid: number;
  /** Stops reading output (backpressure). */
  pause(): void;
  /** Resumes reading output. */
  resume(): void;
  readonly stdin?: StdinPort;
  readonly terminal?: TerminalPort;
  /** Closes envd's ends of the pipes or terminal without signalling the process. */
  release(): void;
}
