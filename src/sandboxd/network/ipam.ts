import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";

/** One sandbox's /30: the host end (.1) and the sandbox (.2). */
export interface Slot {
  index: number;
  hostIp: string;
  ip: string;
  prefixLength: 30;
}

/** A parsed IPv4 network. */
interface Network {
  base: number;
  prefixLength: number;
}

/** Parses "a.b.c.d/n" (n ≤ 30); throws a clear error otherwise. */
export function parseCidr(cidr: string): Network {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(cidr.trim());
  const octets = m ? m.slice(1, 5).map(Number) : [];
  const prefixLength = m ? Number(m[5]) : -1;
  if (!m || octets.some((o) => o > 255) || prefixLength < 8 || prefixLength > 30) {
    throw new Error(`network CIDR ${JSON.stringify(cidr)} is not an IPv4 network of /8 to /30 (e.g. 10.12.0.0/16)`);
  }
  const addr = octets.reduce((a, o) => a * 256 + o, 0);
  const size = 2 ** (32 - prefixLength);
  return { base: addr - (addr % size), prefixLength };
}

/** Dotted form of a 32-bit address. */
function dotted(n: number): string {
  return [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join(".");
}

/** The addresses of slot `index` of `cidr`. */
export function slotAt(cidr: string, index: number): Slot {
  const net = parseCidr(cidr);
  const base = net.base + index * 4;
  return { index, hostIp: dotted(base + 1), ip: dotted(base + 2), prefixLength: 30 };
}

/**
 * Hands out the /30s of one network, one per sandbox. Each taken slot is a file named by its
 * index (created exclusively, holding the sandbox ID and, for a slot wired before its sandbox was
 * known, the name its host end was given) under `dir`, so allocations survive a restart and two
 * creates never take the same slot.
 */
export class Ipam {
  private readonly count: number;

  constructor(
    private readonly dir: string,
    private readonly cidr: string,
  ) {
    this.count = 2 ** (32 - parseCidr(cidr).prefixLength) / 4;
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  }

  /** Takes the lowest free slot for `sandboxID` (its host end named `veth` when given); throws when the network is full. */
  claim(sandboxID: string, veth?: string): Slot {
    const used = new Set(this.taken().keys());
    for (let i = 0; i < this.count; i++) {
      if (used.has(i)) continue;
      let fd: number;
      try {
        fd = openSync(join(this.dir, String(i)), "wx", 0o600);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "EEXIST") continue;
        throw err;
      }
      writeSync(fd, owner(sandboxID, veth));
      closeSync(fd);
      return slotAt(this.cidr, i);
    }
    throw new Error(`no free /30 left in ${this.cidr} (${this.count} sandboxes)`);
  }

  /** Frees every slot held by `sandboxID`. */
  release(sandboxID: string): void {
    for (const [index, owner] of this.taken()) {
      if (owner === sandboxID) rmSync(join(this.dir, String(index)), { force: true });
    }
  }

  /**
   * Hands slot `index` of `from` to `to` (a slot wired ahead goes to the sandbox it is given to),
   * its host end's name kept; the file is replaced whole, so a crash leaves one owner or the other.
   */
  reassign(index: number, from: string, to: string): Slot {
    const file = join(this.dir, String(index));
    const [id, veth] = readFileSync(file, "utf8").trim().split(" ");
    if (id !== from) throw new Error(`slot ${index} is not held by ${from}`);
    const tmp = join(this.dir, `.${index}.tmp`);
    writeFileSync(tmp, owner(to, veth), { mode: 0o600 });
    renameSync(tmp, file);
    return slotAt(this.cidr, index);
  }

  /** Slot index → sandbox ID of every taken slot. */
  taken(): Map<number, string> {
    return new Map([...this.owners()].map(([i, o]) => [i, o.id]));
  }

  /** The name recorded for the host end of `sandboxID`'s slot, when it was given one apart from its ID. */
  vethOf(sandboxID: string): string | undefined {
    for (const o of this.owners().values()) if (o.id === sandboxID) return o.veth;
    return undefined;
  }

  private owners(): Map<number, { id: string; veth?: string }> {
    const out = new Map<number, { id: string; veth?: string }>();
    for (const name of readdirSync(this.dir)) {
      if (!/^\d+$/.test(name)) continue;
      try {
        const [id, veth] = readFileSync(join(this.dir, name), "utf8").trim().split(" ");
        out.set(Number(name), { id, veth });
      } catch {
        // released meanwhile
      }
    }
    return out;
  }
}

/** What a slot's file holds: the owner's ID, then the host end's name when it has one of its own. */
function owner(sandboxID: string, veth?: string): string {
  return veth ? `${sandboxID} ${veth}` : sandboxID;
}
