import uPlot from "uplot";
import type { TeamMetric } from "./api.js";

/** One chart of a team series, redrawn in place on every refresh. */
export interface SeriesChart {
  update(items: TeamMetric[]): void;
}

/** A uPlot line chart of one field of the team series under `host`. */
export function seriesChart(host: HTMLElement, title: string, label: string, pick: (m: TeamMetric) => number, color: string): SeriesChart {
  const opts: uPlot.Options = {
    title,
    width: 520,
    height: 220,
    series: [{}, { label, stroke: color, fill: color + "22", width: 2, points: { show: false } }],
    axes: [{}, { size: 60 }],
    scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] } },
  };
  const plot = new uPlot(opts, [[], []], host);
  return {
    update(items) {
      plot.setData([items.map((i) => i.timestampUnix), items.map(pick)]);
    },
  };
}
