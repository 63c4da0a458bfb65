/** How a sandbox is started for the pool, and which templates' sandboxes may wait there. */
import type { EnvdConnector } from "../envd-client/client.js";
import type { Runtime } from "../runtime/runtime.js";
import type { Template } from "../store/templates.js";
import { OPEN_POLICY, policyKey, sandboxEnv, specOf } from "./spec.js";
import type { WarmSandbox } from "./warm-pool.js";

/**
 * Whether sandboxes of a template may wait started in the pool. Not when the template has a
 * start or ready command: that command would run, and could open connections, before the
 * claiming create's network rules are in (established connections outlive a rule change).
 */
export function poolable(tpl: Template): boolean {
  return !tpl.startCmd && !tpl.readyCmd && tpl.rootfs !== "";
}

/**
 * Starts a sandbox for the pool: the container with open outbound rules, envd's /init with the
 * template's variables and no access token, then one command through envd (`true`, as the
 * default user, over h2c as the proxy relays the SDK's), so that the first command of whoever
 * claims it finds envd's HTTP/2 server, its process path, the shell and their pages already warm.
 */
export async function makeWarm(runtime: Runtime, connect: EnvdConnector, tpl: Template, sandboxID: string, signal: AbortSignal): Promise<WarmSandbox> {
  const addr = await runtime.create(specOf(sandboxID, tpl, OPEN_POLICY, true), signal);
  const user = tpl.defaultUser ?? "user";
  const envd = connect({ ip: addr.ip, port: addr.envdPort });
  await envd.init({ envVars: { ...(tpl.envs ?? {}), ...sandboxEnv(sandboxID, tpl.id) }, defaultUser: tpl.defaultUser ?? undefined, defaultWorkdir: tpl.defaultWorkdir ?? undefined });
  signal.throwIfAborted();
  const code = await envd.run("true", { user, cwd: tpl.defaultWorkdir ?? undefined }, 10_000);
  if (code !== 0) throw new Error(`the warm-up command exited ${code}`);
  return { sandboxID, templateID: tpl.id, buildID: tpl.buildID, cpuCount: tpl.cpuCount, memoryMB: tpl.memoryMB, diskMB: tpl.diskSizeMB, addr, policyKey: policyKey(OPEN_POLICY) };
}
