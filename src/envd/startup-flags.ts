import { setFlagsFromString } from "node:v8";

// Imported first by main.ts, so it runs before any other module of the bundle is initialised.
// Start-up code runs once (protobuf descriptors are decoded, tables built), and what it allocates
// mostly lives on. So while starting: no optimising tier, TurboFan nor (Node 22+) Maglev
// (optimising run-once code only costs a background compile and pages of the compilers' machine
// code: ~3.5 MiB RSS on an idle daemon), no baseline compiler either (Sparkplug: its code for the
// start-up loops stayed, 0.3 MiB of idle RSS, with no slower start), and no growth
// of the young generation beyond its initial size (its survivors are promoted anyway; a grown one
// stays committed: ~1 MiB). Both return to V8's defaults once the daemon listens. A flag that the
// command line or NODE_OPTIONS sets itself is left alone.
const given = [...process.execArgv, process.env.NODE_OPTIONS ?? ""].join(" ").replace(/_/g, "-");
const ours = (...names: string[]) => !names.some((n) => new RegExp(`--(no-)?${n}\\b`).test(given));
const turbofan = ours("turbofan", "maglev", "opt", "jitless", "max-opt");
const sparkplug = ours("sparkplug", "jitless");
// Maglev is on by default from Node 22; on older Node it stays as it is (off).
const maglev = turbofan && Number(process.versions.node.split(".")[0]) >= 22;
const youngGrowth = ours("semi-space-growth-factor");

if (turbofan) {
  setFlagsFromString("--no-turbofan");
  if (maglev) setFlagsFromString("--no-maglev");
}
if (sparkplug) setFlagsFromString("--no-sparkplug");
if (youngGrowth) setFlagsFromString("--semi-space-growth-factor=1");

/** Ends the start-up phase: V8's defaults again (call once the daemon is listening). */
export function startupDone(): void {
  if (turbofan) {
    setFlagsFromString("--turbofan");
    if (maglev) setFlagsFromString("--maglev");
  }
  if (sparkplug) setFlagsFromString("--sparkplug");
  if (youngGrowth) setFlagsFromString("--semi-space-growth-factor=2");
}
