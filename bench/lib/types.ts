/** Outcome of a target check: met, missed, or not applicable to this row. */
export type Verdict = "PASS" | "MISS" | "";

/** One line of the results table: a measurement, its baseline, their ratio and the target verdict. */
export interface Row {
  /** Scenario id, e.g. "1-roundtrip". */
  scenario: string;
  metric: string;
  value: number | null;
  unit: string;
  baseline?: number | null;
  baselineLabel?: string;
  /** value / baseline (for throughputs: envd rate / baseline rate). */
  ratio?: number | null;
  target?: string;
  verdict: Verdict;
  note?: string;
}

/** How one scenario ended: measured, feature missing in the daemon, or failed. */
export type ScenarioStatus = "ok" | "not available" | "error";

/** A scenario's rows and status, as written to results.json. */
export interface ScenarioResult {
  id: string;
  title: string;
  status: ScenarioStatus;
  seconds: number;
  /** Share (0–1) of the machine's CPU time the hypervisor stole while the scenario ran: how noisy the VM was. */
  steal?: number;
  rows: Row[];
  error?: string;
}

/** Run-wide settings handed to every scenario. */
export interface BenchContext {
  quick: boolean;
  /** Overrides the bulk data size of the throughput, transfer and backpressure scenarios. */
  sizeBytes?: number;
  /** How many sandboxes the density scenario grows to (`--sandboxes`). */
  sandboxes?: number;
  /** How many forks of one sandbox the snapshot scenario measures the pool's space with (`--forks`). */
  forks?: number;
  /** Scratch directory under /tmp for this run, removed at the end. */
  tmp: string;
  log(msg: string): void;
}

/** A benchmark scenario: an id, a title and a function that measures and returns rows. */
export interface Scenario {
  id: string;
  title: string;
  run(ctx: BenchContext): Promise<Row[]>;
}
