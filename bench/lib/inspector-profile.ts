/**
 * CPU profiles of a running Node process (sandboxd started with `--inspect=127.0.0.1:0` in its
 * NODE_OPTIONS) taken over its inspector WebSocket for a window, and each sample's time given to
 * the project source file that owns it: the nearest frame on its stack whose place in the bundle
 * maps (through the bundle's source map) to a file under src/; samples with no such frame go to
 * the Node module or the V8 category they ran in.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { SourceMap } from "node:module";
import { fileURLToPath } from "node:url";

/** CPU ms per second of the window, by owner (a `src/...` file, a `node:` module, or a V8 category). */
export type Attribution = Map<string, number>;

/** An inspector session on one process. */
export interface InspectorProfiler {
  /** Samples the process for `ms` and attributes the CPU it used to owners; `save` names a file for the raw profile. */
  profile(ms: number, save?: string): Promise<Attribution>;
  close(): void;
}

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** The `ws://` URL the process printed as "Debugger listening on ...", if it did. */
export function inspectorUrl(stderr: string): string | undefined {
  return /Debugger listening on (ws:\/\/\S+)/.exec(stderr)?.[1];
}

/** Where a frame's code comes from: a src/ file through the bundle's map, a node: module, or undefined. */
function ownerOf(f: CallFrame, maps: Map<string, SourceMap | null>): string | undefined {
  if (f.url.startsWith("node:")) return f.url;
  if (!f.url.startsWith("file:")) return undefined;
  let map = maps.get(f.url);
  if (map === undefined) {
    try {
      const file = fileURLToPath(f.url);
      map = new SourceMap(JSON.parse(readFileSync(`${file}.map`, "utf8")) as ConstructorParameters<typeof SourceMap>[0]);
    } catch {
      map = null;
    }
    maps.set(f.url, map);
  }
  const src = map?.findEntry(f.lineNumber, f.columnNumber);
  const origin = src && "originalSource" in src ? src.originalSource : undefined;
  const at = origin?.lastIndexOf("src/") ?? -1;
  if (origin && at >= 0) return origin.slice(at);
  if (origin?.includes("node_modules/")) return `node_modules/${origin.split("node_modules/").pop()!.split("/")[0]}`;
  return undefined;
}

/**
 * Attributes a profile's samples to owners: per owner, ms of CPU per second of the window. A
 * sample's time since the one before is capped at two sampling intervals: a longer gap is the
 * thread waiting for a core (no sample is taken while it does not run), not running its code.
 */
export function attribute(p: Profile, windowMs: number, intervalUs = 500): Attribution {
  const maps = new Map<string, SourceMap | null>();
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const own = new Map<number, string>();
  const resolve = (id: number): string => {
    const known = own.get(id);
    if (known !== undefined) return known;
    const n = byId.get(id)!;
    const self = ownerOf(n.callFrame, maps);
    const up = parent.get(id);
    // a project frame owns everything it calls; a Node frame is kept only when no project frame is above it
    const above = up === undefined ? undefined : resolve(up);
    // no project frame above: the frame the event loop entered (module and function) names it
    const entry = [self ?? n.callFrame.url, n.callFrame.functionName].filter(Boolean).join(" ") || "(anonymous)";
    const name = self?.startsWith("src/") ? self : above?.startsWith("src/") ? above : above !== undefined && above !== "(root)" ? above : up === undefined ? "(root)" : entry;
    own.set(id, name);
    return name;
  };
  const out: Attribution = new Map();
  for (let i = 0; i < p.samples.length; i++) {
    const name = resolve(p.samples[i]);
    if (name === "(idle)") continue;
    out.set(name, (out.get(name) ?? 0) + Math.min(p.timeDeltas[i], 2 * intervalUs) / 1000);
  }
  for (const [k, v] of out) out.set(k, v / (windowMs / 1000));
  return out;
}

/** Opens an inspector session on `url`; the profiler samples every `intervalUs`. */
export async function connectProfiler(url: string, intervalUs = 500): Promise<InspectorProfiler> {
  const ws = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener("open", () => resolve(), { once: true });
    ws.addEventListener("error", () => reject(new Error(`could not reach the inspector at ${url}`)), { once: true });
  });
  let next = 0;
  const waiting = new Map<number, (r: { result?: unknown; error?: { message: string } }) => void>();
  ws.addEventListener("message", (e) => {
    const m = JSON.parse(String(e.data)) as { id?: number; result?: unknown; error?: { message: string } };
    if (m.id !== undefined) waiting.get(m.id)?.(m);
  });
  const call = (method: string, params: Record<string, unknown> = {}) =>
    new Promise<unknown>((resolve, reject) => {
      const id = ++next;
      waiting.set(id, (r) => {
        waiting.delete(id);
        if (r.error) reject(new Error(`${method}: ${r.error.message}`));
        else resolve(r.result);
      });
      ws.send(JSON.stringify({ id, method, params }));
    });
  await call("Profiler.enable");
  await call("Profiler.setSamplingInterval", { interval: intervalUs });
  // the first profile of a process pays for V8 collecting its code's positions: take it untimed
  await call("Profiler.start");
  await new Promise((r) => setTimeout(r, 1000));
  await call("Profiler.stop");
  return {
    async profile(ms, save) {
      await call("Profiler.start");
      await new Promise((r) => setTimeout(r, ms));
      const { profile } = (await call("Profiler.stop")) as { profile: Profile };
      if (save) writeFileSync(save, JSON.stringify(profile));
      return attribute(profile, ms, intervalUs);
    },
    close: () => ws.close(),
  };
}
