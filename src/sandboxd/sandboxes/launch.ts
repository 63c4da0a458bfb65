import type { Logger } from "../log.js";
import { egressPolicy, type EgressPolicy } from "../network/policy.js";
import type { WarmSandbox } from "../pool/warm-pool.js";
import type { Runtime, SandboxAddress, SandboxSpec } from "../runtime/runtime.js";
import type { Template } from "../store/templates.js";
import { connectEnvd } from "../envd-client/client.js";

/** The outbound rules of a create that names none: every public destination allowed. */
export const OPEN_POLICY: EgressPolicy = egressPolicy({ allowInternetAccess: true });

/** A policy's identity, to tell whether a pooled sandbox's rules are the ones a create asks for. */
export const policyKey = (p: EgressPolicy): string => JSON.stringify(p);

/** The runtime's spec of a sandbox of `tpl`. */
export function specOf(sandboxID: string, tpl: Template, egress: EgressPolicy, background = false): SandboxSpec {
  return { sandboxID, templateID: tpl.id, buildID: tpl.buildID, rootfs: tpl.rootfs, cpuCount: tpl.cpuCount, memoryMB: tpl.memoryMB, diskSizeMB: tpl.diskSizeMB, egress, background };
}

/** The variables every sandbox's envd is given beside the template's and the caller's. */
export function sandboxEnv(sandboxID: string, templateID: string): Record<string, string> {
  return { E2B_SANDBOX_ID: sandboxID, E2B_TEMPLATE_ID: templateID, E2B_SANDBOX: "true" };
}

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
 * default user), so that the first command of whoever claims it finds envd's process path, the
 * shell and their pages already warm.
 */
export async function makeWarm(runtime: Runtime, tpl: Template, sandboxID: string, signal: AbortSignal): Promise<WarmSandbox> {
  const addr = await runtime.create(specOf(sandboxID, tpl, OPEN_POLICY, true), signal);
  const user = tpl.defaultUser ?? "user";
  const envd = connectEnvd({ ip: addr.ip, port: addr.envdPort });
  await envd.init({ envVars: { ...(tpl.envs ?? {}), ...sandboxEnv(sandboxID, tpl.id) }, defaultUser: tpl.defaultUser ?? undefined, defaultWorkdir: tpl.defaultWorkdir ?? undefined });
  signal.throwIfAborted();
  const code = await envd.run("true", { user, cwd: tpl.defaultWorkdir ?? undefined }, 10_000);
  if (code !== 0) throw new Error(`the warm-up command exited ${code}`);
  return { sandboxID, templateID: tpl.id, buildID: tpl.buildID, cpuCount: tpl.cpuCount, memoryMB: tpl.memoryMB, diskMB: tpl.diskSizeMB, addr, policyKey: policyKey(OPEN_POLICY) };
}

/**
 * Gets the create its running sandbox with envd initialized: a claimed pooled sandbox (its
 * outbound rules replaced when the create asks for others), or a cold start. A pooled sandbox
 * that fails its claim is removed and the sandbox cold-started under the same ID instead, so a
 * claim is never worse than no pool.
 */
export async function launch(p: {
  runtime: Runtime; log: Logger; warm?: WarmSandbox; sandboxID: string; tpl: Template; egress: EgressPolicy;
  init(addr: SandboxAddress): Promise<string | undefined>;
}): Promise<{ addr: SandboxAddress; reported: string | undefined; claimed: boolean }> {
  const { runtime, warm } = p;
  if (warm) {
    try {
      // The rules, the CPU share and envd's /init touch different things: all at once.
      const [, , reported] = await Promise.all([
        warm.policyKey !== policyKey(p.egress) ? runtime.setEgress(warm.sandboxID, p.egress) : undefined,
        runtime.foreground(warm.sandboxID, warm.cpuCount),
        p.init(warm.addr),
      ]);
      return { addr: warm.addr, reported, claimed: true };
    } catch (err) {
      p.log.warn({ sandboxID: warm.sandboxID, err: (err as Error).message }, "a pooled sandbox could not be claimed; starting one cold");
      await runtime.remove(warm.sandboxID);
    }
  }
  const addr = await runtime.create(specOf(p.sandboxID, p.tpl, p.egress));
  return { addr, reported: await p.init(addr), claimed: false };
}
