import type { Logger } from "../log.js";
import type { EgressPolicy } from "../network/policy.js";
import type { Runtime } from "../runtime/runtime.js";
import type { SandboxRow } from "../store/sandboxes.js";
import type { Store } from "../store/store.js";
import type { Template } from "../store/templates.js";
import { admit, checkSize, fits, reserved, type Budget, type Resources } from "./budget.js";
import { Invalid, LimitExceeded, OperationFailed } from "../errors.js";
import type { CreateInput } from "./inputs.js";
import { launch } from "./launch.js";
import { resolveTemplate, versionAtLeast } from "./resolve.js";
import { runStartCommand } from "./start-cmd.js";
import { trafficAccessToken } from "./tokens.js";
import { sandboxBody } from "./views.js";
import { newSandboxID, type ServicePool } from "./warm-templates.js";

/** What a create needs of the sandbox service. */
export interface CreateDeps {
  store: Store;
  runtime: Runtime;
  log: Logger;
  serial: <T>(key: string, fn: () => Promise<T>) => Promise<T>;
  warm: ServicePool;
  budget: Budget;
  /** Creates in flight and when the last ended (the pool's refills wait on them). */
  activity: { creating: number; lastCreated: number };
  secret(): string;
  tokenOf(row: SandboxRow): string | undefined;
  policyOf(row: SandboxRow): EgressPolicy;
  publish(row: SandboxRow): void;
  dropRoute(sandboxID: string): void;
  init(row: SandboxRow, tpl: Template, envVars: Record<string, string>): Promise<string | undefined>;
  checkTimeout(teamID: string, timeoutS: number): void;
  onStarted?: (teamID: string) => void;
}

/**
 * POST /sandboxes: checks the request, records the sandbox as starting (within the team's limit),
 * then starts it (claimed from the warm pool when one of its template build waits, cold
 * otherwise), initializes envd, runs the template's start command and records it running. A
 * failed start leaves nothing behind.
 */
export async function createSandbox(d: CreateDeps, teamID: string, input: CreateInput): Promise<Record<string, unknown>> {
  const { store, runtime, log } = d;
  const t0 = Date.now();
  const tpl = resolveTemplate(store, teamID, input.templateID);
  const timeout = input.timeout;
  d.checkTimeout(teamID, timeout);
  const network = { ...(input.network ?? {}) };
  const publicTraffic = network.allowPublicTraffic !== false;
  if (!publicTraffic && !input.secure) throw new Invalid("You cannot create a sandbox without public access unless you enable secure envd access via 'secure' flag.");
  if (input.secure && !versionAtLeast(tpl.envdVersion, "0.2.0")) throw new Invalid(`Template '${input.templateID}' must be rebuilt for secure sandbox access (its envd is older than 0.2.0)`);
  const max = store.teams.get(teamID)?.maxConcurrent ?? 100;
  const need: Resources = { memoryMB: tpl.memoryMB, diskMB: tpl.diskSizeMB };
  checkSize(d.budget, input.templateID, need);
  const pooled = await d.warm.take(tpl);
  // The pool's sandboxes count against the host budget (a claimed one has left it); pooled
  // sandboxes of other templates give way to a create that would not fit beside them.
  const hostUsed = (): Resources => {
    const rows = reserved(store.sandboxes.all());
    const pool = d.warm.pool.reserved();
    return { memoryMB: rows.memoryMB + pool.memoryMB, diskMB: rows.diskMB + pool.diskMB };
  };
  if (!fits(hostUsed(), need, d.budget.host)) await d.warm.pool.shed(() => fits(hostUsed(), need, d.budget.host));
  const id = pooled?.sandboxID ?? newSandboxID();
  const now = new Date().toISOString();
  const row: SandboxRow = {
    id, teamID, templateID: tpl.id, state: "starting", startedAt: now, endAt: now, metadata: input.metadata ?? {}, autoPause: input.autoPause ?? false, autoResume: input.autoResume ?? false,
    secure: input.secure, trafficToken: publicTraffic ? null : trafficAccessToken(d.secret(), id), network, allowInternetAccess: input.allowInternetAccess ?? true,
    ip: null, envdPort: null, envdVersion: tpl.envdVersion, cpuCount: tpl.cpuCount, memoryMB: tpl.memoryMB, diskSizeMB: tpl.diskSizeMB,
  };
  const egress = d.policyOf(row);
  try {
    store.transaction(() => {
      if (store.sandboxes.countLive(teamID) >= max) {
        throw new LimitExceeded(`you have reached the maximum number of concurrent E2B sandboxes (${max}). If you need more, please visit 'https://e2b.dev/docs/billing'`);
      }
      admit(d.budget, hostUsed(), reserved(store.sandboxes.listByTeam(teamID)), need);
      store.sandboxes.insert(row);
      store.templates.spawned(tpl.id, now);
    });
  } catch (err) {
    if (pooled) d.warm.pool.giveBack(pooled);
    throw err;
  }
  d.activity.creating++;
  return d.serial(id, async () => {
    let phase = "starting the sandbox";
    try {
      const { addr, reported, claimed } = await launch({
        runtime, log, warm: pooled, sandboxID: id, tpl, egress,
        init: (a) => {
          row.ip = a.ip;
          row.envdPort = a.envdPort;
          phase = "initializing envd";
          return d.init(row, tpl, { ...(tpl.envs ?? {}), ...(input.envVars ?? {}) });
        },
      });
      phase = "running the template's start and ready commands";
      await runStartCommand({ ip: addr.ip, port: addr.envdPort, accessToken: d.tokenOf(row), user: tpl.defaultUser ?? "user", cwd: tpl.defaultWorkdir ?? undefined }, tpl.startCmd, tpl.readyCmd);
      const t = Date.now();
      // The version recorded for the template is what E2B's API reports (the SDK gates features
      // on it); envd's own header is the fallback for a template that records none.
      Object.assign(row, { state: "running", envdVersion: tpl.envdVersion || reported || "0.1.0", startedAt: new Date(t).toISOString(), endAt: new Date(t + timeout * 1000).toISOString() });
      store.sandboxes.update(row);
      d.publish(row);
      d.onStarted?.(teamID);
      log.info({ sandboxID: id, templateID: tpl.id, ms: Date.now() - t0, fromPool: claimed }, "sandbox created");
      return sandboxBody(row, tpl, d.tokenOf(row));
    } catch (err) {
      log.error({ sandboxID: id, phase, err: (err as Error).message }, "sandbox create failed");
      d.dropRoute(id);
      await runtime.remove(id).catch((e: Error) => log.error({ sandboxID: id, err: e.message }, "removing a failed sandbox failed"));
      store.sandboxes.delete(id);
      throw new OperationFailed(`Failed to create sandbox: ${phase} failed: ${(err as Error).message}`, "sandbox_create_failed");
    } finally {
      d.activity.creating--;
      d.activity.lastCreated = Date.now();
    }
  });
}
