import type { Row, Verdict } from "./types.js";

/** Which way a figure improves: times and sizes want lower, rates want higher. */
export type Better = "lower" | "higher";

/** Input for a measured row compared against a baseline. */
export interface Compared {
  scenario: string;
  metric: string;
  value: number;
  unit: string;
  baseline: number;
  baselineLabel: string;
  /** Target as text plus its check; omitted for informational rows. */
  target?: { text: string; met: (r: { value: number; baseline: number; ratio: number }) => boolean };
  note?: string;
}

/** Builds a row with ratio value/baseline and a PASS/MISS verdict when a target is given. */
export function compared(c: Compared): Row {
  const ratio = c.baseline > 0 ? c.value / c.baseline : null;
  let verdict: Verdict = "";
  if (c.target) verdict = ratio !== null && c.target.met({ value: c.value, baseline: c.baseline, ratio }) ? "PASS" : "MISS";
  return {
    scenario: c.scenario,
    metric: c.metric,
    value: round(c.value),
    unit: c.unit,
    baseline: round(c.baseline),
    baselineLabel: c.baselineLabel,
    ratio: ratio === null ? null : round(ratio, 3),
    target: c.target?.text,
    verdict,
    note: c.note,
  };
}

/** A row without a baseline; `met` decides PASS/MISS when a target is given. */
export function single(
  scenario: string,
  metric: string,
  value: number,
  unit: string,
  target?: { text: string; met: boolean },
  note?: string,
): Row {
  return {
    scenario,
    metric,
    value: round(value),
    unit,
    target: target?.text,
    verdict: target ? (target.met ? "PASS" : "MISS") : "",
    note,
  };
}

/** Rounds to `digits` significant decimals, keeping integers as they are. */
export function round(x: number, digits = 2): number {
  if (!Number.isFinite(x)) return x;
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
