import type { StartRequest, ProcessEvent } from "../gen/process/process_pb.js";
import { ProcessHandle } from "./handle.js";
import { spawnPiped } from "./pipes.js";
import type { SpawnPlan } from "./plan.js";
import { spawnOnPty } from "./pty.js";
import type { ProcessRegistry } from "./registry.js";
import { spawnTurn } from "./spawn-turn.js";
import type { ExecTools } from "./wrapper.js";

/** A freshly started process and the Start caller's subscription to it (taken before the spawn). */
export interface Started {
  readonly handle: ProcessHandle;
  readonly events: AsyncIterableIterator<ProcessEvent>;
}

/**
 * Spawns the planned process in its own turn of the event loop (see spawnTurn): subscribes
 * the caller first so no output is missed, spawns on pipes or a PTY, registers it, and arms
 * the Connect-Timeout-Ms lifetime measured from `receivedAt` (performance.now() ms), tied to
 * the call's `signal`, whose deadline is that same lifetime.
 */
export async function startProcess(
  req: StartRequest,
  plan: SpawnPlan,
  tools: ExecTools,
  registry: ProcessRegistry,
  receivedAt: number,
  signal?: AbortSignal,
): Promise<Started> {
  // The slot is held from before the wait until the process is in the registry (or failed).
  const release = registry.reserve();
  try {
    await spawnTurn();
    return await spawned(req, plan, tools, registry, receivedAt, signal);
  } finally {
    release();
  }
}

/** Subscribes the caller, spawns, registers and arms the lifetime (the slot is already held). */
async function spawned(...[req, plan, tools, registry, receivedAt, signal]: Parameters<typeof startProcess>): Promise<Started> {
  const config = req.process!;
  const handle = new ProcessHandle(
    { ...config, args: [...config.args], envs: { ...config.envs } },
    req.tag,
    plan.pty !== undefined,
  );
  const events = handle.output.subscribe();
  try {
    if (plan.pty) spawnOnPty(plan, tools, handle);
    else await spawnPiped(plan, tools, handle);
  } catch (err) {
    await events.return();
    throw err;
  }
  registry.add(handle);
  if (plan.lifetimeMs !== undefined) handle.limitLifetime(receivedAt + plan.lifetimeMs, signal);
  return { handle, events };
}
