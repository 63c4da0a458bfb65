import uPlot from "uplot";
import type { TeamMetric } from "./api.js";

/** One chart of a team series, redrawn in place on every refresh. */
export interface SeriesChart {
  /** Shows the items over [start, end] (unix seconds), so a range with few buckets keeps its width. */
  update(items: TeamMetric[], start: number, end: number): void;
}

/** A uPlot line chart of one field of the team series under `host`. */
export function seriesChart(host: HTMLElement, title: string, label: string, pick: (m: TeamMetric) => number, color: string): SeriesChart {
  const opts: uPlot.Options = {
    title,
    width: 520,
    height: 220,
    series: [{}, { label, stroke: color, fill: color + "22", width: 2 }],
    axes: [{}, { size: 60 }],
    scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] } },
  };
  const plot = new uPlot(opts, [[], []], host);
  return {
    update(items, start, end) {
      plot.setData([items.map((i) => i.timestampUnix), items.map(pick)], false);
      plot.setScale("x", { min: start, max: end });
    },
  };
}
