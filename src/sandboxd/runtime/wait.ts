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
