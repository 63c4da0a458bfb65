import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { NetworkLease } from "../host/sandbox-network.js";

/** What the runtime remembers of one sandbox across sandboxd restarts: its IDs and its network lease. */
export interface SandboxRecord extends NetworkLease {
  sandboxID: string;
  templateID: string;
  buildID: string;
  createdAt: string;
}

/** One JSON file per sandbox under `dir`, written atomically (temp file + rename). */
export class RecordStore {
  constructor(private readonly dir: string) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  }

  private file(id: string): string {
    return join(this.dir, `${id}.json`);
  }

  /** Writes (or replaces) the record. */
  put(rec: SandboxRecord): void {
    const tmp = `${this.file(rec.sandboxID)}.tmp`;
    writeFileSync(tmp, JSON.stringify(rec) + "\n", { mode: 0o600 });
    renameSync(tmp, this.file(rec.sandboxID));
  }

  /** The record, or undefined when absent or unreadable. */
  get(id: string): SandboxRecord | undefined {
    try {
      return JSON.parse(readFileSync(this.file(id), "utf8")) as SandboxRecord;
    } catch {
      return undefined;
    }
  }

  delete(id: string): void {
    rmSync(this.file(id), { force: true });
    rmSync(`${this.file(id)}.tmp`, { force: true });
  }

  /** IDs of every record (including half-written ones). */
  ids(): string[] {
    return [...new Set(readdirSync(this.dir).filter((f) => /\.json(\.tmp)?$/.test(f)).map((f) => f.replace(/\.json(\.tmp)?$/, "")))];
  }
}
