/**
 * A pull's progress for the build log: layers and bytes, read from what skopeo has written so
 * far (finished blobs in the shared blob directory, the blob being written in the layout's temp
 * files), at most one line every two seconds, and one line per finished layer.
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Descriptor } from "./manifest.js";

/** Sizes as people read them. */
export function mib(bytes: number): string {
  return bytes < 1 << 20 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / (1 << 20)).toFixed(1)} MiB`;
}

/** Tracks one pull. */
export class PullProgress {
  private readonly total: number;
  private readonly cached: Set<string>;
  private readonly reported = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private lastLine = 0;
  private lastBytes = -1;
  private seenBytes = -1;
  private changedAt = Date.now();

  constructor(private readonly blobDir: string, private readonly layout: string, private readonly layers: Descriptor[], private readonly say: (m: string) => void) {
    this.total = layers.reduce((n, l) => n + l.size, 0);
    this.cached = new Set(layers.filter((l) => this.have(l)).map((l) => l.digest));
    for (const d of this.cached) this.reported.add(d);
  }

  private have(l: Descriptor): boolean {
    return existsSync(join(this.blobDir, "sha256", l.digest.slice(7)));
  }

  /** "3 layers, 28.4 MiB (1 already here)". */
  summary(): string {
    const n = this.layers.length;
    return `${n} layer${n === 1 ? "" : "s"}, ${mib(this.total)}${this.cached.size ? ` (${this.cached.size} already here)` : ""}`;
  }

  /** Starts the periodic byte count. */
  start(): void {
    this.timer = setInterval(() => this.tick(), 1000);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Reports newly finished layers, and the bytes so far when two seconds have passed. */
  tick(): void {
    let bytes = 0;
    this.layers.forEach((l, i) => {
      if (!this.have(l)) return;
      bytes += l.size;
      if (this.reported.has(l.digest)) return;
      this.reported.add(l.digest);
      this.say(`layer ${i + 1}/${this.layers.length} ${l.digest.slice(7, 19)}: ${mib(l.size)} done`);
    });
    try {
      for (const f of readdirSync(this.layout)) if (f.startsWith("oci-put-blob")) bytes += statSync(join(this.layout, f)).size;
    } catch {
      // the layout is not made yet, or a temp file was renamed meanwhile
    }
    const now = Date.now();
    if (bytes !== this.seenBytes) (this.seenBytes = bytes), (this.changedAt = now);
    if (now - this.lastLine >= 2000 && bytes !== this.lastBytes && bytes < this.total) {
      this.lastLine = now;
      this.lastBytes = bytes;
      this.say(`downloaded ${mib(bytes)} of ${mib(this.total)} (${this.reported.size}/${this.layers.length} layers)`);
    }
  }

  /** How long the pull has gone without a byte more (as of the last tick). */
  idleMs(): number {
    return Date.now() - this.changedAt;
  }

  /** Reports the layers finished since the last tick and the total. */
  done(): void {
    this.tick();
    this.say(`pulled ${mib(this.total)} in ${this.layers.length} layer(s)`);
  }
}
