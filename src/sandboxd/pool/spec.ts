/**
 * What a sandbox of a template is started as: its ID, the runtime's spec, its outbound rules and
 * the variables envd gets. Shared by the pool's starts and the lifecycle's cold starts.
 */
import { egressPolicy, type EgressPolicy } from "../network/policy.js";
import type { SandboxSpec } from "../runtime/runtime.js";
import { randomId } from "../store/seed.js";
import type { Template } from "../store/templates.js";

/** A new sandbox ID: "i" + 20 of [a-z0-9], as E2B's. */
export const newSandboxID = (): string => "i" + randomId(20);

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
