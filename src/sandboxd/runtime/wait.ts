/** Waiting for a sandbox's envd: its listening socket seen from the host, then a connection to it. */
import { readFileSync } from "node:fs";
import { connect } from "node:net";

/** Resolves true when one TCP connection to host:port is accepted within `ms`, false otherwise. */
function tryConnect(host: string, port: number, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ host, port });
    const done = (ok: boolean) => {
      clearTimeout(timer);
      sock.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), ms);
    sock.once("connect", () => done(true));
    sock.once("error", () => done(false));
  });
}

/**
 * Polls until host:port accepts a TCP connection. Rejects with `why()` appended when `ms` pass,
 * when `alive()` says the process that should listen is gone, or when `signal` aborts.
 */
export async function waitForPort(p: {
  host: string;
  port: number;
  ms: number;
  signal?: AbortSignal;
  alive: () => Promise<boolean>;
  why: () => string;
}): Promise<void> {
  const t0 = Date.now();
  for (let n = 0; ; n++) {
    p.signal?.throwIfAborted();
    // a connection on the host's own veth is answered at once (accepted, or refused while envd
    // starts); one not answered within 200 ms lost its SYN, and a new one goes sooner than TCP's
    // own retransmission (1 s)
    if (await tryConnect(p.host, p.port, 200)) return;
    if (n % 10 === 9 && !(await p.alive())) throw new Error(`the sandbox exited before envd listened on ${p.host}:${p.port}\n${p.why()}`);
    if (Date.now() - t0 > p.ms) throw new Error(`envd did not accept connections on ${p.host}:${p.port} within ${p.ms} ms\n${p.why()}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Whether a socket of the network namespace of `pid` listens on `port` (any address; /proc/<pid>/net/tcp and tcp6). */
function listening(pid: number, port: number): boolean {
  const hex = port.toString(16).toUpperCase().padStart(4, "0");
  // "sl local rem st": a local address ending in :PORT, state 0A (LISTEN)
  const re = new RegExp(`^\\s*\\d+: [0-9A-F]+:${hex} [0-9A-F]+:0000 0A `, "m");
  for (const f of ["tcp", "tcp6"]) {
    try {
      if (re.test(readFileSync(`/proc/${pid}/net/${f}`, "utf8"))) return true;
    } catch {
      // no such table (no IPv6), or the process is gone (the caller checks)
    }
  }
  return false;
}

/** Whether process `pid` exists. */
function exists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Waits until a socket in the network namespace of process `pid` (the sandbox's init) listens on
 * `port`, read from the host's view of its tables every few milliseconds: no connection attempts
 * and no runc calls while the sandbox starts, so the wait takes no CPU from it. Rejects with
 * `why()` appended when `ms` pass, when the process is gone, or when `signal` aborts.
 */
async function waitForListen(p: { pid: number; port: number; ms: number; signal?: AbortSignal; why: () => string }): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    p.signal?.throwIfAborted();
    if (listening(p.pid, p.port)) return;
    if (!exists(p.pid)) throw new Error(`the sandbox exited before envd listened on port ${p.port}\n${p.why()}`);
    if (Date.now() - t0 > p.ms) throw new Error(`envd did not listen on port ${p.port} within ${p.ms} ms\n${p.why()}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * Waits for envd in a sandbox whose init is `pid`: its socket listening (seen from the host),
 * then a connection to `host`:`port` accepted. Resolves the milliseconds until it listened.
 */
export async function waitForEnvd(p: { pid: number; host: string; port: number; ms: number; signal?: AbortSignal; alive: () => Promise<boolean>; why: () => string }): Promise<number> {
  const t0 = Date.now();
  await waitForListen(p);
  const listenMs = Date.now() - t0;
  await waitForPort(p);
  return listenMs;
}
