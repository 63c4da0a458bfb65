/** How a create gets its running sandbox: a claimed pooled one, or a cold start. */
import type { EgressPolicy } from "../network/policy.js";
import { policyKey, specOf } from "../pool/spec.js";
import type { WarmSandbox } from "../pool/warm-pool.js";
import type { SandboxAddress } from "../runtime/runtime.js";
import type { Template } from "../store/templates.js";
import type { Lifecycle } from "./lifecycle.js";

/**
 * Gets the create its running sandbox with envd initialized: a claimed pooled sandbox (its
 * outbound rules replaced when the create asks for others), or a cold start. A pooled sandbox
 * that fails its claim is removed and the sandbox cold-started under the same ID instead, so a
 * claim is never worse than no pool.
 */
export async function launch(l: Pick<Lifecycle, "runtime" | "log">, p: {
  warm?: WarmSandbox; sandboxID: string; tpl: Template; egress: EgressPolicy;
  /** A cold start on a copy of this snapshot image, or on the sandbox's own disk kept by a pause to disk. */
  fromSnapshot?: string; keptDisk?: boolean;
  init(addr: SandboxAddress): Promise<string | undefined>;
}): Promise<{ addr: SandboxAddress; reported: string | undefined; claimed: boolean }> {
  const { runtime } = l;
  const { warm } = p;
  if (warm) {
    try {
      // The rules, the CPU share and envd's /init touch different things: all at once.
      const t0 = performance.now();
      const took = <T>(work: Promise<T>) => work.then((v) => ({ v, ms: Math.round(performance.now() - t0) }));
      const [rules, cpu, init] = await Promise.all([
        took(warm.policyKey !== policyKey(p.egress) ? runtime.setEgress(warm.sandboxID, p.egress) : Promise.resolve()),
        took(runtime.foreground(warm.sandboxID, warm.cpuCount)),
        took(p.init(warm.addr)),
      ]);
      l.log.debug({ sandboxID: warm.sandboxID, rulesMs: rules.ms, cpuMs: cpu.ms, initMs: init.ms }, "claim phases");
      return { addr: warm.addr, reported: init.v, claimed: true };
    } catch (err) {
      l.log.warn({ sandboxID: warm.sandboxID, err: (err as Error).message }, "a pooled sandbox could not be claimed; starting one cold");
      await runtime.remove(warm.sandboxID);
    }
  }
  const addr = await runtime.create({ ...specOf(p.sandboxID, p.tpl, p.egress), fromSnapshot: p.fromSnapshot, keptDisk: p.keptDisk });
  return { addr, reported: await p.init(addr), claimed: false };
}
