import { ApiFailure, call, session, type Listed, type SandboxMetric, type Team, type TeamMetric } from "./api.js";
import { seriesChart, type SeriesChart } from "./charts.js";
import { sparkline } from "./sparkline.js";
import { inspectedSandbox, showSandboxLog } from "./sandbox-log.js";
import { refreshTemplates } from "./templates.js";

/**
 * The dashboard page: sign in with an API key, then the team's running and paused sandboxes
 * (with their logs and a kill button), its concurrency and start-rate charts, and its templates, refreshed
 * every 5 s. Every value from the API reaches the page through textContent, never as markup.
 */

const REFRESH_MS = 5000;
const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

/** A table cell with text (never parsed as HTML). */
function cell(text: string, cls?: string): HTMLTableCellElement {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

/** "3m 20s", "2h 5m", "4d 1h" for a number of seconds. */
function duration(s: number): string {
  if (!Number.isFinite(s)) return "";
  const sign = s < 0 ? "-" : "";
  s = Math.abs(Math.round(s));
  const units: [number, string][] = [[86400, "d"], [3600, "h"], [60, "m"], [1, "s"]];
  const parts: string[] = [];
  for (const [n, u] of units) {
    if (s >= n || (u === "s" && parts.length === 0)) parts.push(`${Math.floor(s / n)}${u}`);
    s %= n;
    if (parts.length === 2) break;
  }
  return sign + parts.join(" ");
}

const mib = (bytes: number) => `${Math.round(bytes / 1048576)} MiB`;

let team: Team | undefined;
let timer: number | undefined;
let charts: { concurrent: SeriesChart; rate: SeriesChart } | undefined;

function showError(err: unknown): void {
  if (err instanceof ApiFailure && err.status === 401) return signOut("Your key is no longer valid; sign in again.");
  $("error").textContent = err instanceof Error ? err.message : String(err);
}

async function kill(id: string, button: HTMLButtonElement): Promise<void> {
  button.disabled = true;
  try {
    await call("DELETE", `/sandboxes/${encodeURIComponent(id)}`);
    await refresh();
  } catch (err) {
    button.disabled = false;
    showError(err);
  }
}

async function refreshSandboxes(): Promise<void> {
  const list = await call<Listed[]>("GET", "/v2/sandboxes?state=running,paused&limit=100");
  const ids = list.map((s) => s.sandboxID);
  const metrics = ids.length ? (await call<{ sandboxes: Record<string, SandboxMetric> }>("GET", `/sandboxes/metrics?sandbox_ids=${ids.map(encodeURIComponent).join(",")}`)).sandboxes : {};
  const now = Date.now();
  // The last 10 minutes of each running sandbox, for its CPU and memory sparklines.
  const since = Math.floor(now / 1000) - 600;
  const history = new Map(
    await Promise.all(
      list.filter((s) => s.state === "running").map(async (s) => [s.sandboxID, await call<SandboxMetric[]>("GET", `/sandboxes/${encodeURIComponent(s.sandboxID)}/metrics?start=${since}`).catch(() => [])] as const),
    ),
  );
  const body = $("sandboxes").querySelector("tbody")!;
  const rows = list.map((s) => {
    const tr = document.createElement("tr");
    tr.dataset.sandboxId = s.sandboxID;
    const m = metrics[s.sandboxID];
    const meta = Object.entries(s.metadata ?? {}).map(([k, v]) => `${k}=${v}`).join(", ");
    const h = history.get(s.sandboxID) ?? [];
    const cpu = cell(m ? `${m.cpuUsedPct.toFixed(1)} % of ${m.cpuCount}` : "");
    cpu.append(sparkline(h.map((x) => x.cpuUsedPct), "CPU % over the last 10 minutes", "#2f6fde", 100));
    const mem = cell(m ? `${mib(m.memUsed)} / ${mib(m.memTotal)}` : "");
    mem.append(sparkline(h.map((x) => x.memUsed), "memory used over the last 10 minutes", "#2b8a3e", m?.memTotal));
    tr.append(
      cell(s.sandboxID, "mono"),
      cell(s.alias ?? s.templateID),
      cell(s.state),
      cell(duration((now - Date.parse(s.startedAt)) / 1000)),
      cell(s.state === "running" ? duration((Date.parse(s.endAt) - now) / 1000) : ""),
      cpu,
      mem,
      cell(meta, "meta"),
    );
    const td = document.createElement("td");
    const logs = document.createElement("button");
    logs.type = "button";
    logs.className = "logs";
    logs.textContent = "Log";
    logs.addEventListener("click", () => void showSandboxLog(s.sandboxID));
    const button = document.createElement("button");
    button.type = "button";
    button.className = "kill";
    button.textContent = "Kill";
    button.addEventListener("click", () => void kill(s.sandboxID, button));
    td.append(logs, button);
    tr.append(td);
    return tr;
  });
  body.replaceChildren(...rows);
  $("no-sandboxes").hidden = rows.length > 0;
}

async function refreshCharts(): Promise<void> {
  if (!team) return;
  const end = Math.floor(Date.now() / 1000);
  const start = end - Number(($("range") as HTMLSelectElement).value);
  const items = await call<TeamMetric[]>("GET", `/teams/${encodeURIComponent(team.teamID)}/metrics?start=${start}&end=${end}`);
  charts ??= {
    concurrent: seriesChart($("chart-concurrent"), "Concurrent sandboxes", "sandboxes", (m) => m.concurrentSandboxes, "#2f6fde"),
    rate: seriesChart($("chart-rate"), "Sandbox start rate (per second)", "starts/s", (m) => m.sandboxStartRate, "#d9480f"),
  };
  charts.concurrent.update(items, start, end);
  charts.rate.update(items, start, end);
  document.body.dataset.chartPoints = String(items.length);
}

async function refresh(): Promise<void> {
  try {
    await Promise.all([refreshSandboxes(), refreshTemplates(), refreshCharts()]);
    $("error").textContent = "";
    document.body.dataset.refreshed = String(Date.now());
  } catch (err) {
    showError(err);
  }
}

function signOut(message = ""): void {
  session.clear();
  team = undefined;
  if (timer !== undefined) clearInterval(timer);
  timer = undefined;
  $("app").hidden = true;
  $("signout").hidden = true;
  $("team").textContent = "";
  $("signin").hidden = false;
  $("signin-error").textContent = message;
}

async function enter(key: string): Promise<void> {
  const teams = await call<Team[]>("GET", "/teams", key);
  session.set(key);
  team = teams[0];
  $("team").textContent = team ? `team ${team.name} (${team.teamID})` : "";
  $("signin").hidden = true;
  $("app").hidden = false;
  $("signout").hidden = false;
  await refresh();
  timer = window.setInterval(() => void refresh(), REFRESH_MS);
  const inspected = inspectedSandbox();
  if (inspected) await showSandboxLog(inspected);
}

function main(): void {
  const form = $("signin") as HTMLFormElement;
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = $("key") as HTMLInputElement;
    const key = input.value.trim();
    input.value = "";
    enter(key).catch((err) => signOut(err instanceof ApiFailure && err.status === 401 ? "That key is not valid." : String((err as Error).message)));
  });
  $("signout").addEventListener("click", () => signOut());
  $("range").addEventListener("change", () => void refreshCharts().catch(showError));
  window.addEventListener("hashchange", () => {
    const inspected = inspectedSandbox();
    if (inspected && team) void showSandboxLog(inspected);
  });
  const key = session.key();
  if (key) enter(key).catch(() => signOut());
  document.body.dataset.ready = "1";
}

main();
