import { spawn, type SpawnOptions } from "node:child_process";
import type { Client } from "@connectrpc/connect";
import type { Process } from "../../src/envd/gen/process/process_pb.js";
import { probe } from "./available.js";

/** What one Start stream delivered. */
export interface StartOutcome {
  pid: number;
  bytes: number;
  exitCode: number;
  events: number;
}

/** Options for a Start call from the bench. */
export interface StartOptions {
  signal?: AbortSignal;
  /** Called with the pid as soon as the start event arrives. */
  onStart?: (pid: number) => void;
  tag?: string;
  headers?: Record<string, string>;
}

/** Runs `cmd args` through Process.Start and drains the stream to the end event. */
export async function startToEnd(
  client: Client<typeof Process>,
  cmd: string,
  args: string[],
  opts: StartOptions = {},
): Promise<StartOutcome> {
  return probe("Process.Start", async () => {
    const out: StartOutcome = { pid: 0, bytes: 0, exitCode: NaN, events: 0 };
    const stream = client.start(
      { process: { cmd, args, envs: {} }, stdin: false, tag: opts.tag },
      { signal: opts.signal, headers: opts.headers },
    );
    for await (const res of stream) {
      out.events++;
      const ev = res.event?.event;
      if (ev?.case === "start") {
        out.pid = ev.value.pid;
        opts.onStart?.(ev.value.pid);
      } else if (ev?.case === "data") out.bytes += ev.value.output.value?.length ?? 0;
      else if (ev?.case === "end") out.exitCode = ev.value.exitCode;
    }
    return out;
  });
}

/** Spawns a command with no I/O and resolves at its exit. */
export function localRun(cmd: string, args: string[], opts: SpawnOptions = {}): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { ...opts, stdio: "ignore" });
    child.once("error", reject);
    child.once("exit", (code) => resolve(code));
  });
}
