import type { Row, ScenarioResult } from "./types.js";

/** Formats a number compactly: 3 significant digits for small values, integers for large. */
export function fmt(x: number | null | undefined): string {
  if (x === null || x === undefined || Number.isNaN(x)) return "-";
  if (!Number.isFinite(x) || Number.isInteger(x)) return String(x);
  const a = Math.abs(x);
  if (a >= 100) return Math.round(x).toString();
  if (a >= 10) return x.toFixed(1);
  if (a >= 1) return x.toFixed(2);
  return x.toPrecision(2);
}

function cells(r: Row): string[] {
  const value = r.value === null ? "-" : `${fmt(r.value)} ${r.unit}`;
  const base = r.baseline === undefined ? "" : `${fmt(r.baseline)} ${r.unit}${r.baselineLabel ? ` (${r.baselineLabel})` : ""}`;
  const ratio = r.ratio === undefined || r.ratio === null ? "" : `${fmt(r.ratio)}×`;
  return [r.metric, value, base, ratio, r.target ?? "", r.verdict];
}

const HEAD = ["metric", "envd", "baseline", "ratio", "target", "result"];

function statusLine(s: ScenarioResult): string | undefined {
  if (s.status === "not available") return `not available: ${s.error ?? ""}`;
  if (s.status === "error") return `ERROR: ${s.error ?? ""}`;
  return undefined;
}

/** How much of the machine's CPU time (a 0–1 share) the hypervisor stole, in words. */
export function stolen(share: number): string {
  return `${(share * 100).toFixed(1)} % of the machine's CPU time stolen by the hypervisor`;
}

/** Renders results as an aligned plain-text table grouped by scenario, with notes below each group. */
export function renderText(results: ScenarioResult[]): string {
  const body = results.flatMap((s) => s.rows.map(cells));
  const widths = HEAD.map((h, i) => Math.max(h.length, ...body.map((c) => c[i].length)));
  const line = (c: string[]) => c.map((x, i) => x.padEnd(widths[i])).join("  ").trimEnd();
  const out = [line(HEAD), widths.map((w) => "-".repeat(w)).join("  ")];
  for (const s of results) {
    out.push(`[${s.id}] ${s.title}  (${s.seconds.toFixed(1)} s${s.steal === undefined ? "" : `, ${stolen(s.steal)}`})`);
    const status = statusLine(s);
    if (status) out.push(`  ${status}`);
    for (const r of s.rows) out.push(line(cells(r)));
    for (const r of s.rows) if (r.note) out.push(`  · ${r.metric}: ${r.note}`);
  }
  return out.join("\n");
}

/** Renders results as a Markdown table (for the README), notes as a list after it. */
export function renderMarkdown(results: ScenarioResult[]): string {
  const esc = (x: string) => x.replace(/\|/g, "\\|");
  const out = ["| # | " + HEAD.join(" | ") + " |", "|" + "---|".repeat(HEAD.length + 1)];
  const notes: string[] = [];
  for (const s of results) {
    const status = statusLine(s);
    if (status) out.push(`| ${s.id} | ${esc(s.title)}: ${esc(status)} | | | | | |`);
    for (const r of s.rows) {
      out.push(`| ${s.id.split("-")[0]} | ${cells(r).map(esc).join(" | ")} |`);
      if (r.note) notes.push(`- ${s.id.split("-")[0]} ${r.metric}: ${r.note}`);
    }
    if (s.steal !== undefined) notes.push(`- ${s.id.split("-")[0]} (whole scenario, ${s.seconds.toFixed(0)} s): ${stolen(s.steal)}`);
  }
  return out.join("\n") + (notes.length ? "\n\n" + notes.join("\n") : "") + "\n";
}
