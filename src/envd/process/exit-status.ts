import { constants } from "node:os";

/** How a process ended, as the OS reported it: an exit code, or the signal that killed it. */
export interface ExitInfo {
  readonly code: number | null;
  readonly signal: string | null;
}

/** The fields of the protocol's EndEvent. */
export interface EndFields {
  exitCode: number;
  exited: boolean;
  status: string;
  error?: string;
}

// Go's syscall.Signal.String() texts, so `status` reads exactly as the reference's does.
const GO_SIGNAL_TEXT: Record<string, string> = {
  SIGABRT: "aborted",
  SIGALRM: "alarm clock",
  SIGBUS: "bus error",
  SIGCHLD: "child exited",
  SIGCONT: "continued",
  SIGFPE: "floating point exception",
  SIGHUP: "hangup",
  SIGILL: "illegal instruction",
  SIGINT: "interrupt",
  SIGIO: "I/O possible",
  SIGKILL: "killed",
  SIGPIPE: "broken pipe",
  SIGPROF: "profiling timer expired",
  SIGPWR: "power failure",
  SIGQUIT: "quit",
  SIGSEGV: "segmentation fault",
  SIGSTKFLT: "stack fault",
  SIGSTOP: "stopped (signal)",
  SIGSYS: "bad system call",
  SIGTERM: "terminated",
  SIGTRAP: "trace/breakpoint trap",
  SIGTSTP: "stopped",
  SIGTTIN: "stopped (tty input)",
  SIGTTOU: "stopped (tty output)",
  SIGURG: "urgent I/O condition",
  SIGUSR1: "user defined signal 1",
  SIGUSR2: "user defined signal 2",
  SIGVTALRM: "virtual timer expired",
  SIGWINCH: "window changed",
  SIGXCPU: "CPU time limit exceeded",
  SIGXFSZ: "file size limit exceeded",
};

/** The signal name (SIGKILL, ...) of a signal number; `signal <n>` when unknown. */
export function signalName(num: number): string {
  for (const [name, value] of Object.entries(constants.signals)) if (value === num) return name;
  return `signal ${num}`;
}

/** Builds the end event: exit code (−1 when signalled), `exit status N` / `signal: killed`, error unless 0. */
export function endFields(info: ExitInfo): EndFields {
  if (info.signal !== null) {
    const status = `signal: ${GO_SIGNAL_TEXT[info.signal] ?? info.signal}`;
    return { exitCode: -1, exited: false, status, error: status };
  }
  const code = info.code ?? -1;
  const status = `exit status ${code}`;
  return code === 0 ? { exitCode: 0, exited: true, status } : { exitCode: code, exited: true, status, error: status };
}
