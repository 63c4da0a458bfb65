import { getHeapSpaceStatistics } from "node:v8";
import type { Metrics } from "./service.js";

/** A label value escaped as the text exposition format wants (backslash, quote, newline). */
function label(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

/**
 * Prometheus text (format 0.0.4) for one team: sandboxd's own health (process-wide) and the
 * team's figures: live sandboxes, sandboxes started, and each running sandbox's latest envd
 * reading and whether envd answers (the rows from memory: a scrape reads nothing from the store).
 */
export function prometheusText(metrics: Metrics, teamID: string): string {
  const out: string[] = [];
  const metric = (name: string, type: string, help: string, rows: [Record<string, string>, number][]) => {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [labels, value] of rows) {
      const l = Object.entries(labels).map(([k, v]) => `${k}="${label(v)}"`).join(",");
      out.push(`${name}${l ? `{${l}}` : ""} ${Number.isFinite(value) ? value : 0}`);
    }
  };
  const mem = process.memoryUsage();
  const cpu = process.cpuUsage();
  const poll = metrics.poller.stats();
  metric("sandboxd_up", "gauge", "1 while sandboxd serves the API", [[{}, 1]]);
  metric("sandboxd_start_time_seconds", "gauge", "When this sandboxd process started (unix seconds)", [[{}, Math.floor(metrics.startedAt / 1000)]]);
  metric("sandboxd_process_cpu_seconds_total", "counter", "CPU time sandboxd has used (user + system)", [[{}, (cpu.user + cpu.system) / 1e6]]);
  metric("sandboxd_process_resident_memory_bytes", "gauge", "sandboxd's resident set size", [[{}, mem.rss]]);
  metric("sandboxd_process_heap_used_bytes", "gauge", "V8 heap in use by sandboxd's JavaScript objects", [[{}, mem.heapUsed]]);
  const live = metrics.heap();
  metric("sandboxd_process_heap_live_bytes", "gauge", "V8 heap in use right after sandboxd's last full garbage collection (what it keeps)", live === undefined ? [] : [[{}, live]]);
  metric("sandboxd_process_heap_total_bytes", "gauge", "V8 heap sandboxd has reserved", [[{}, mem.heapTotal]]);
  metric("sandboxd_process_heap_space_size_bytes", "gauge", "V8 heap reserved, by space (where a grown heap is)", getHeapSpaceStatistics().map((sp) => [{ space: sp.space_name }, sp.space_size]));
  metric("sandboxd_process_external_memory_bytes", "gauge", "Memory outside the V8 heap held by JavaScript objects (buffers, native handles)", [[{}, mem.external]]);
  metric("sandboxd_envd_polls_total", "counter", "envd /metrics requests sent by the poller", [[{}, poll.requests]]);
  metric("sandboxd_envd_poll_failures_total", "counter", "envd /metrics requests that failed or timed out", [[{}, poll.failures]]);
  const pool = metrics.warmPool();
  metric("sandboxd_warm_pool_ready", "gauge", "Started sandboxes waiting in the warm pool, by template", pool.ready.map((r) => [{ template_id: r.templateID }, r.count]));
  metric("sandboxd_creates_total", "counter", "Creates since sandboxd started, by whether a pooled sandbox was claimed", [[{ from: "pool" }, pool.claimed], [{ from: "cold" }, pool.missed]]);

  const rows = metrics.rows().filter((r) => r.teamID === teamID);
  const team = { team_id: teamID };
  metric("sandboxd_team_sandboxes", "gauge", "The team's sandboxes by state", (["running", "paused"] as const).map((s) => [{ ...team, state: s }, rows.filter((r) => r.state === s).length]));
  metric("sandboxd_team_sandboxes_started_total", "counter", "Sandboxes the team started since sandboxd started", [[team, metrics.sampler.startedTotals().get(teamID) ?? 0]]);

  const running = rows.filter((r) => r.state === "running");
  const per = (pick: (id: string) => number | undefined): [Record<string, string>, number][] =>
    running.flatMap((r) => {
      const v = pick(r.id);
      return v === undefined ? [] : [[{ sandbox_id: r.id }, v] as [Record<string, string>, number]];
    });
  const latest = (id: string) => metrics.poller.latest(id);
  metric("sandboxd_sandbox_envd_up", "gauge", "1 if the sandbox's envd answered its last /metrics poll, 0 if not", per((id) => {
    const h = metrics.poller.health(id);
    return h === undefined ? undefined : h.up ? 1 : 0;
  }));
  metric("sandboxd_sandbox_cpu_count", "gauge", "vCPUs the sandbox sees", per((id) => latest(id)?.cpuCount));
  metric("sandboxd_sandbox_cpu_used_percent", "gauge", "CPU busy % over the last poll period", per((id) => latest(id)?.cpuUsedPct));
  metric("sandboxd_sandbox_memory_used_bytes", "gauge", "Memory used in the sandbox", per((id) => latest(id)?.memUsed));
  metric("sandboxd_sandbox_memory_total_bytes", "gauge", "Memory the sandbox may use", per((id) => latest(id)?.memTotal));
  metric("sandboxd_sandbox_disk_used_bytes", "gauge", "Disk used in the sandbox's root filesystem", per((id) => latest(id)?.diskUsed));
  metric("sandboxd_sandbox_disk_total_bytes", "gauge", "Size of the sandbox's root filesystem", per((id) => latest(id)?.diskTotal));
  return out.join("\n") + "\n";
}
