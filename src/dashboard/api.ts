/**
 * The dashboard's calls to the control API: same origin (`/api/…` on the dashboard's host, which
 * sandboxd hands to the API), the key in the X-API-Key header only. The key lives in
 * sessionStorage: gone with the tab, never in a URL or a cookie.
 */

const STORAGE = "sandboxd.apiKey";

/** An API answer that was not 2xx, with the API's message. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export const session = {
  key: (): string | null => sessionStorage.getItem(STORAGE),
  set: (key: string) => sessionStorage.setItem(STORAGE, key),
  clear: () => sessionStorage.removeItem(STORAGE),
};

/** Calls `/api<path>` with the key; resolves with the JSON body (undefined for 204). */
/**
 * fetch, made again (up to twice, 300 ms apart) when it fails without an answer: browsers abort
 * requests in flight when the machine's network changes. Reads only: a kill is sent once.
 */
async function fetchRetrying(url: string, init: RequestInit): Promise<Response> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fetch(url, init);
    } catch (err) {
      if (init.method !== "GET" || attempt >= 3) throw err;
      await new Promise((r) => setTimeout(r, 300));
    }
  }
}

export async function call<T>(method: string, path: string, key = session.key()): Promise<T> {
  const res = await fetchRetrying(`/api${path}`, { method, headers: { "x-api-key": key ?? "" }, cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer" });
  const text = await res.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  if (!res.ok) {
    const message = typeof (body as { message?: unknown })?.message === "string" ? (body as { message: string }).message : `HTTP ${res.status}`;
    throw new ApiFailure(res.status, message);
  }
  return body as T;
}

/** The API's shapes the dashboard reads. */
export interface Team {
  teamID: string;
  name: string;
}
export interface Listed {
  sandboxID: string;
  templateID: string;
  alias?: string;
  state: string;
  startedAt: string;
  endAt: string;
  metadata?: Record<string, string>;
}
export interface SandboxMetric {
  cpuUsedPct: number;
  cpuCount: number;
  memUsed: number;
  memTotal: number;
}
export interface TemplateInfo {
  templateID: string;
  aliases: string[];
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  spawnCount: number;
  updatedAt: string;
  /** Status of the template's newest build. */
  buildStatus: string;
}
export interface TeamMetric {
  timestampUnix: number;
  concurrentSandboxes: number;
  sandboxStartRate: number;
}
