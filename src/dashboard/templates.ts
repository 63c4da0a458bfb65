// The templates table: each template's newest build status, and its build's log on demand.
import { call, type TemplateInfo } from "./api.js";

interface TemplateBuilds {
  builds: { buildID: string; status: string; createdAt: string }[];
}

function cell(text: string, cls?: string): HTMLTableCellElement {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

/** Shows the log of a template's newest build (as text) in the log panel. */
async function showLog(t: TemplateInfo): Promise<void> {
  const panel = document.getElementById("build-log")!;
  const title = document.getElementById("build-log-title")!;
  const pre = panel.querySelector("pre")!;
  panel.hidden = false;
  title.textContent = `Build log of ${t.aliases[0] ?? t.templateID}`;
  pre.textContent = "loading…";
  try {
    const { builds } = await call<TemplateBuilds>("GET", `/templates/${encodeURIComponent(t.templateID)}`);
    const newest = builds[0];
    if (!newest) {
      pre.textContent = "This template has no builds through the API (it is built in).";
      return;
    }
    const { logs } = await call<{ logs: { timestamp: string; level: string; message: string }[] }>(
      "GET",
      `/templates/${encodeURIComponent(t.templateID)}/builds/${encodeURIComponent(newest.buildID)}/logs?limit=100`,
    );
    title.textContent = `Build ${newest.buildID} of ${t.aliases[0] ?? t.templateID}: ${newest.status}`;
    pre.textContent = logs.map((l) => `${l.timestamp} ${l.level} ${l.message}`).join("\n") || "(no log lines)";
  } catch (err) {
    pre.textContent = `Cannot read the build log: ${(err as Error).message}`;
  }
}

/** Refills the templates table. */
export async function refreshTemplates(): Promise<void> {
  const list = await call<TemplateInfo[]>("GET", "/templates");
  document.getElementById("templates")!.querySelector("tbody")!.replaceChildren(
    ...list.map((t) => {
      const tr = document.createElement("tr");
      tr.dataset.templateId = t.templateID;
      tr.append(cell(t.aliases.join(", ")), cell(t.templateID, "mono"), cell(t.buildStatus), cell(String(t.cpuCount)), cell(String(t.memoryMB)), cell(String(t.diskSizeMB)), cell(String(t.spawnCount)), cell(t.updatedAt));
      const td = document.createElement("td");
      const button = document.createElement("button");
      button.type = "button";
      button.className = "logs";
      button.textContent = "Log";
      button.addEventListener("click", () => void showLog(t));
      td.append(button);
      tr.append(td);
      return tr;
    }),
  );
}
