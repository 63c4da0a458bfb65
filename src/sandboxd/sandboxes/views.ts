import type { SandboxRow } from "../store/sandboxes.js";
import type { Template } from "../store/templates.js";

/** E2B's constant client ID. */
export const CLIENT_ID = "6532622b";

/** The `Sandbox` body of create, connect and resume. */
export function sandboxBody(row: SandboxRow, tpl: Template | undefined, envdToken: string | undefined): Record<string, unknown> {
  return {
    templateID: row.templateID,
    sandboxID: row.id,
    ...(tpl?.alias ? { alias: tpl.alias } : {}),
    clientID: CLIENT_ID,
    envdVersion: row.envdVersion,
    ...(envdToken ? { envdAccessToken: envdToken } : {}),
    trafficAccessToken: row.trafficToken ?? null,
    domain: null,
  };
}

/** The `ListedSandbox` shape of both list endpoints. */
export function listedBody(row: SandboxRow, tpl: Template | undefined): Record<string, unknown> {
  return {
    templateID: row.templateID,
    ...(tpl?.alias ? { alias: tpl.alias } : {}),
    sandboxID: row.id,
    clientID: CLIENT_ID,
    startedAt: row.startedAt,
    endAt: row.endAt,
    cpuCount: row.cpuCount,
    memoryMB: row.memoryMB,
    diskSizeMB: row.diskSizeMB,
    metadata: row.metadata,
    state: row.state,
    envdVersion: row.envdVersion,
    volumeMounts: [],
  };
}

/** The `SandboxDetail` body of GET /sandboxes/{id}. */
export function detailBody(row: SandboxRow, tpl: Template | undefined, envdToken: string | undefined): Record<string, unknown> {
  const net = row.network as { allowPublicTraffic?: boolean; allowOut?: string[]; denyOut?: string[]; maskRequestHost?: string; rules?: unknown; httpsPorts?: number[] };
  return {
    ...listedBody(row, tpl),
    ...(envdToken ? { envdAccessToken: envdToken } : {}),
    allowInternetAccess: row.allowInternetAccess,
    domain: null,
    network: {
      allowPublicTraffic: net.allowPublicTraffic ?? true,
      ...(net.allowOut ? { allowOut: net.allowOut } : {}),
      ...(net.denyOut ? { denyOut: net.denyOut } : {}),
      ...(net.maskRequestHost ? { maskRequestHost: net.maskRequestHost } : {}),
      ...(net.rules ? { rules: net.rules } : {}),
      ...(net.httpsPorts ? { httpsPorts: net.httpsPorts } : {}),
    },
    lifecycle: { autoResume: row.autoResume ?? false, onTimeout: row.autoPause ? "pause" : "kill" },
  };
}
