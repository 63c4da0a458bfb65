/** The warm pool's mechanism: started sandboxes kept ready per template build, refilled in the background. */
import { realClock, type Clock } from "../clock.js";
import type { Logger } from "../log.js";
import type { SandboxAddress } from "../runtime/runtime.js";
import type { Template } from "../store/templates.js";

/** A started sandbox waiting in the pool: envd answers, the template's start command has run. */
export interface WarmSandbox {
  sandboxID: string;
  templateID: string;
  buildID: string;
  cpuCount: number;
  /** The memory and disk it reserves (its template's). */
  memoryMB: number;
  diskMB: number;
  addr: SandboxAddress;
  /** The outbound rules it was started with (a policy's JSON), so a claim replaces them only when they differ. */
  policyKey: string;
}

/** The memory and disk pooled sandboxes reserve, MiB. */
export type PoolResources = Pick<WarmSandbox, "memoryMB" | "diskMB">;

/** What the pool is told and asks for. */
export interface WarmPoolOptions {
  /** Sandboxes kept started per warm template; 0 turns the pool off. */
  size: number;
  log: Logger;
  /** Time for back-offs, checks and the refill loop's waits (the real clock when not given). */
  clock?: Clock;
  /** The templates to keep warm now, most wanted first (the pool keeps at most `maxTemplates`). */
  templates(): Template[];
  maxTemplates?: number;
  /** Starts one sandbox of the template with this ID and readies it for a claim. */
  make(tpl: Template, sandboxID: string, signal: AbortSignal): Promise<WarmSandbox>;
  /** Removes a sandbox the pool no longer wants (stale build, template gone, shutdown). */
  remove(sandboxID: string): Promise<void>;
  /** A fresh sandbox ID. */
  newID(): string;
  /** Whether user-facing creates are in flight; refills wait for them so they get the CPU first. */
  foregroundBusy(): boolean;
  /** Which of these sandboxes still run (a pooled sandbox can die: killed, OOM, a host reboot). */
  running?(sandboxIDs: string[]): Promise<Set<string>>;
  /**
   * Whether one more pooled sandbox of this size may start now, given what the pool already
   * reserves; the pool is the first to give way, so this keeps room for a create.
   */
  admit?(need: PoolResources, pooled: PoolResources): boolean;
}

/** The pool's figures for /metrics. */
export interface WarmPoolStats {
  /** Ready sandboxes by template. */
  ready: { templateID: string; count: number }[];
  /** Creates that claimed a pooled sandbox, and those that found none for their template build. */
  claimed: number;
  missed: number;
}

const KEY = (t: Pick<Template, "id" | "buildID">) => `${t.id}/${t.buildID}`;
const IDLE_TICK_MS = 2000;
/** Sandboxes started at once: most of a start waits on the kernel and on envd, so two overlap well. */
const PARALLEL_FILLS = 2;
const BUSY_WAIT_MS = 25;
const MAX_BACKOFF_MS = 60_000;
/** How often the pooled sandboxes are checked to be still running. */
const CHECK_EVERY_MS = 5000;

/**
 * Started sandboxes kept ready per template, so that a create claims one (an /init away from
 * serving) instead of cold-starting a container. At most two refills run at once, and new ones
 * start only while no user-facing create runs. Pooled sandboxes are not in the store: nobody owns them, the proxy
 * cannot reach them, and a restart removes them as sandboxes the store does not know.
 */
export class WarmPool {
  private readonly ready = new Map<string, WarmSandbox[]>();
  private readonly failures = new Map<string, { count: number; until: number }>();
  /** Sandboxes being started, by template build. */
  private readonly filling = new Map<string, Set<Promise<void>>>();
  /** What the sandboxes being started will reserve. */
  private readonly fillingSize = new Map<Promise<void>, PoolResources>();
  private readonly abort = new AbortController();
  private wake?: () => void;
  private loop?: Promise<void>;
  private closed = false;
  private claimed = 0;
  private missed = 0;
  private readonly clock: Clock;
  private checkedAt: number;

  constructor(private readonly o: WarmPoolOptions) {
    this.clock = o.clock ?? realClock;
    this.checkedAt = this.clock.now();
  }

  get enabled(): boolean {
    return this.o.size > 0;
  }

  /** Starts filling; resolves at once. */
  start(): void {
    if (!this.enabled || this.loop) return;
    this.loop = this.run().catch((err: Error) => this.o.log.error({ err: err.message }, "warm pool stopped"));
  }

  /**
   * Takes a ready sandbox of exactly this template build. When none is ready but one is being
   * started, waits for that start (begun earlier, it ends before a cold start begun now would)
   * and takes what it made, unless another create took it first. The refill follows.
   */
  async take(tpl: Pick<Template, "id" | "buildID">): Promise<WarmSandbox | undefined> {
    const key = KEY(tpl);
    let got = this.ready.get(key)?.shift();
    const starting = this.filling.get(key);
    if (!got && starting && starting.size > 0) {
      await Promise.race(starting);
      got = this.ready.get(key)?.shift();
    }
    if (got) this.claimed++;
    else this.missed++;
    this.kick();
    return got;
  }

  /** Counts a create that did not ask the pool (pool off, or a template that is never pooled). */
  countMiss(): void {
    this.missed++;
  }

  /** Puts back a sandbox taken by a create that then did not go ahead (it is still untouched). */
  giveBack(w: WarmSandbox): void {
    this.claimed--;
    if (this.closed) return void this.discard(w, "the pool is closed");
    const key = KEY({ id: w.templateID, buildID: w.buildID });
    this.ready.set(key, [w, ...(this.ready.get(key) ?? [])]);
  }

  /** The memory and disk the pool's sandboxes reserve, ready and being started. */
  reserved(): PoolResources {
    const out = { memoryMB: 0, diskMB: 0 };
    for (const w of [...this.ready.values()].flat()) {
      out.memoryMB += w.memoryMB;
      out.diskMB += w.diskMB;
    }
    for (const r of this.fillingSize.values()) {
      out.memoryMB += r.memoryMB;
      out.diskMB += r.diskMB;
    }
    return out;
  }

  /**
   * Removes ready sandboxes, the most recently warmed templates first, until `enough` holds or none is left (a
   * create that the budget refuses takes precedence over the pool); resolves once they are gone.
   * True when something was removed.
   */
  async shed(enough: () => boolean): Promise<boolean> {
    const gone: Promise<void>[] = [];
    for (const [key, list] of [...this.ready].reverse()) {
      while (list.length > 0 && !enough()) {
        const w = list.pop()!;
        this.o.log.info({ sandboxID: w.sandboxID, templateID: w.templateID }, "warm pool: giving a pooled sandbox's memory and disk to a create");
        gone.push(this.o.remove(w.sandboxID).catch((err: Error) => this.o.log.error({ sandboxID: w.sandboxID, err: err.message }, "warm pool: removing a pooled sandbox failed")));
      }
      if (list.length === 0) this.ready.delete(key);
    }
    await Promise.all(gone);
    return gone.length > 0;
  }

  /** Wakes the refill loop (a template was spawned, a sandbox taken). */
  kick(): void {
    this.wake?.();
  }

  stats(): WarmPoolStats {
    const ready = [...this.ready.values()].filter((l) => l.length > 0).map((l) => ({ templateID: l[0].templateID, count: l.length }));
    return { ready, claimed: this.claimed, missed: this.missed };
  }

  /** Stops refilling and removes every pooled sandbox. */
  async close(): Promise<void> {
    this.closed = true;
    this.abort.abort(new Error("sandboxd is stopping"));
    this.kick();
    await this.loop;
    await Promise.allSettled([...this.filling.values()].flatMap((set) => [...set]));
    const all = [...this.ready.values()].flat();
    this.ready.clear();
    await Promise.allSettled(all.map((w) => this.o.remove(w.sandboxID)));
  }

  private discard(w: WarmSandbox, why: string): void {
    this.o.log.debug({ sandboxID: w.sandboxID, templateID: w.templateID, why }, "warm pool: removing a pooled sandbox");
    void this.o.remove(w.sandboxID).catch((err: Error) => this.o.log.error({ sandboxID: w.sandboxID, err: err.message }, "warm pool: removing a pooled sandbox failed"));
  }

  /** Drops pooled sandboxes of builds no longer wanted; returns the wanted templates still short. */
  private reconcile(): Template[] {
    const wanted = this.o.templates().slice(0, this.o.maxTemplates ?? 4);
    const keys = new Set(wanted.map(KEY));
    for (const [key, list] of this.ready) {
      if (keys.has(key)) continue;
      this.ready.delete(key);
      for (const w of list) this.discard(w, "its template build is no longer kept warm");
    }
    const now = this.clock.now();
    const have = (k: string) => (this.ready.get(k)?.length ?? 0) + (this.filling.get(k)?.size ?? 0);
    return wanted.filter((t) => have(KEY(t)) < this.o.size && (this.failures.get(KEY(t))?.until ?? 0) <= now);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const cancel = this.clock.after(ms, done);
      function done() {
        cancel();
        resolve();
      }
      this.wake = done;
    });
  }

  /** Drops pooled sandboxes that no longer run, so they are neither handed out nor counted. */
  private async check(): Promise<void> {
    this.checkedAt = this.clock.now();
    const ids = [...this.ready.values()].flat().map((w) => w.sandboxID);
    if (!this.o.running || ids.length === 0) return;
    const alive = await this.o.running(ids).catch(() => undefined);
    if (!alive) return;
    for (const [key, list] of this.ready) {
      const keep = list.filter((w) => alive.has(w.sandboxID));
      for (const w of list) if (!alive.has(w.sandboxID)) this.discard(w, "it stopped running");
      this.ready.set(key, keep);
    }
  }

  private async run(): Promise<void> {
    while (!this.closed) {
      if (this.clock.now() - this.checkedAt >= CHECK_EVERY_MS) await this.check();
      const short = this.reconcile();
      const inFlight = [...this.filling.values()].reduce((n, set) => n + set.size, 0);
      if (short.length === 0 || inFlight >= PARALLEL_FILLS) {
        await this.sleep(IDLE_TICK_MS);
        continue;
      }
      if (this.o.foregroundBusy()) {
        await this.sleep(BUSY_WAIT_MS);
        continue;
      }
      const next = short[0];
      const size = { memoryMB: next.memoryMB, diskMB: next.diskSizeMB };
      if (this.o.admit && !this.o.admit(size, this.reserved())) {
        await this.sleep(IDLE_TICK_MS);
        continue;
      }
      const key = KEY(next);
      const set = this.filling.get(key) ?? new Set();
      this.filling.set(key, set);
      const p: Promise<void> = this.fill(next).finally(() => {
        set.delete(p);
        this.fillingSize.delete(p);
        if (set.size === 0 && this.filling.get(key) === set) this.filling.delete(key);
        this.kick();
      });
      set.add(p);
      this.fillingSize.set(p, size);
    }
  }

  private async fill(tpl: Template): Promise<void> {
    const key = KEY(tpl);
    const id = this.o.newID();
    const t0 = this.clock.now();
    try {
      const w = await this.o.make(tpl, id, this.abort.signal);
      if (this.closed) return void (await this.o.remove(id));
      this.ready.set(key, [...(this.ready.get(key) ?? []), w]);
      this.failures.delete(key);
      this.o.log.debug({ sandboxID: id, templateID: tpl.id, ms: this.clock.now() - t0 }, "warm pool: sandbox ready");
    } catch (err) {
      await this.o.remove(id).catch(() => undefined);
      if (this.closed) return;
      // A template that cannot start is retried ever more slowly, not in a hot loop.
      const count = (this.failures.get(key)?.count ?? 0) + 1;
      const wait = Math.min(MAX_BACKOFF_MS, 1000 * 2 ** (count - 1));
      this.failures.set(key, { count, until: this.clock.now() + wait });
      this.o.log.warn({ templateID: tpl.id, err: (err as Error).message, retryInMs: wait }, "warm pool: starting a sandbox failed");
    }
  }
}
