/**
 * Slots wired before a sandbox asks for one, so that a cold start (a create without the warm
 * pool, a fork, a resume from disk) has no network work on its path. A spare is a user namespace
 * (with the sandboxes' id mapping) and a network namespace owned by it, made by a waiting holder
 * process, with the veth pair, addresses, neighbour entries, the sandbox's firewall (open policy)
 * and its host rules in place, all made niced in the background. The container joins both
 * namespaces by path; then the holder is let go. The holder waits on a FIFO whose write end only
 * sandboxd holds: when sandboxd exits, however it exits, the holder reads end-of-file and goes, and
 * its namespaces (veth pair included) with it.
 */
import { randomBytes } from "node:crypto";
import { closeSync, constants, mkdirSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "../log.js";
import { spawnTool } from "../host/spawner.js";
import { MAPPED_RANGE, MAPPED_ROOT } from "../host/idmap.js";
import type { EgressPolicy, NetworkLease, PreparedSlot } from "../host/sandbox-network.js";
import type { Slot } from "./ipam.js";

/** How a spare is wired and taken apart (the slot network's own steps). */
export interface SpareWiring {
  /** Claims a slot for `id` with its host end named `veth`. */
  claim(id: string, veth: string): Slot;
  /** The host end's name of a spare. */
  vethName(id: string): string;
  /** Wires `slot` into the network namespace of `pid`, niced, with the open policy. */
  attach(slot: Slot, veth: string, pid: number): Promise<void>;
  /** Hands the slot held by `from` to `to`. */
  reassign(index: number, from: string, to: string): void;
  /** Replaces the firewall of the spare (namespace of `pid`) with `policy`, inside and on the host. */
  setPolicy(lease: NetworkLease, pid: number, policy: EgressPolicy): Promise<void>;
  /** Removes a spare's host end and host rules, and gives its slot back. */
  discard(id: string): Promise<void>;
}

/** The prefix of a spare's placeholder ID (an ID the sandbox ID pattern accepts). */
const SPARE_PREFIX = "spare-";
/** How long a holder is allowed to wait (the spawner's timeout: a spare older than this is made again). */
const HOLDER_MS = 2 ** 31 - 1;
/** The holder: records its PID, then waits for end-of-file on the FIFO. */
const HOLDER_SCRIPT = 'mkfifo -m 600 "$1" && echo $$ > "$2.tmp" && mv "$2.tmp" "$2" && read x < "$1"';

interface Spare {
  id: string;
  slot: Slot;
  veth: string;
  pid: number;
  /** The write end of the holder's FIFO. */
  fd: number;
  /** The namespaces' inode numbers, checked again before a container joins them (a PID could be reused). */
  inodes: [number, number];
  gone: boolean;
}

/** Whether `policy` is the open one spares are wired with. */
function isOpen(policy?: EgressPolicy): boolean {
  return !policy || (policy.allow.length === 0 && policy.deny.length === 0 && policy.domains.length === 0);
}

/** The spares of one slot network. */
export class SpareSlots {
  private readonly dir: string;
  private readonly ready: Spare[] = [];
  /** Placeholders held by this process (being made or ready). */
  private readonly live = new Set<string>();
  /** Spares being made now. */
  private readonly making = new Set<Promise<void>>();
  private closed = true;

  constructor(
    runtimeDir: string,
    private readonly want: number,
    private readonly wiring: SpareWiring,
    private readonly log: Logger,
    private readonly nice: number,
  ) {
    this.dir = join(runtimeDir, "spares");
  }

  /** Starts keeping `want` spares (after the host network is up); first releases what a crashed predecessor left waiting. */
  open(): void {
    if (!this.closed) return;
    this.closed = false;
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    this.sweep();
    this.fill();
  }

  /** Lets go the holders of spares this process does not hold (a crashed predecessor's, left waiting to open their FIFO). */
  sweep(): void {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      return;
    }
    for (const name of names) {
      if (this.live.has(name)) continue;
      releaseFifo(join(this.dir, name, "fifo"));
      rmSync(join(this.dir, name), { recursive: true, force: true });
    }
  }

  /** Placeholders this process holds (a sweep leaves them be). */
  held(): ReadonlySet<string> {
    return this.live;
  }

  /** Takes a ready spare for `sandboxID` with `policy` in force; undefined when none is ready. */
  async take(sandboxID: string, policy?: EgressPolicy): Promise<PreparedSlot | undefined> {
    let s: Spare | undefined;
    while ((s = this.ready.shift()) && (s.gone || !sameNamespaces(s))) void this.drop(s);
    // the next spare is wired once this start is over, not while it runs
    if (!s) {
      this.fill();
      return undefined;
    }
    const spare = s;
    try {
      this.wiring.reassign(s.slot.index, s.id, sandboxID);
    } catch (err) {
      // its slot was swept from under it (another instance's sweep of this data dir)
      this.log.warn({ err: (err as Error).message }, "a spare network slot was lost");
      void this.drop(spare);
      return undefined;
    }
    this.live.delete(s.id);
    const lease: NetworkLease = { ip: s.slot.ip, hostIp: s.slot.hostIp, hostVeth: s.veth, slot: s.slot.index };
    const letGo = () => {
      if (spare.fd < 0) return;
      closeSync(spare.fd);
      spare.fd = -1;
      rmSync(join(this.dir, spare.id), { recursive: true, force: true });
    };
    const ended = () => {
      letGo();
      this.fill();
    };
    try {
      if (!isOpen(policy)) await this.wiring.setPolicy(lease, s.pid, policy!);
    } catch (err) {
      ended();
      throw err;
    }
    return { lease, userns: `/proc/${s.pid}/ns/user`, netns: `/proc/${s.pid}/ns/net`, check: () => sameNamespaces(spare), letGo, ended };
  }

  /** Lets every spare go and takes it apart, those being made once they are (nothing of them is left behind). */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.making]);
    const all = this.ready.splice(0);
    await Promise.all(all.map((s) => this.drop(s)));
  }

  /** Starts making spares until `want` are ready or being made. */
  private fill(): void {
    while (!this.closed && this.ready.length + this.making.size < this.want) {
      const made: Promise<void> = this.make()
        .then((s) => {
          if (this.closed) return this.drop(s);
          this.ready.push(s);
        })
        .catch((err: Error) => this.log.warn({ err: err.message }, "wiring a spare network slot failed"))
        .finally(() => this.making.delete(made));
      this.making.add(made);
    }
  }

  private async make(): Promise<Spare> {
    const id = SPARE_PREFIX + randomBytes(8).toString("hex");
    const dir = join(this.dir, id);
    this.live.add(id);
    const veth = this.wiring.vethName(id);
    let slot: Slot | undefined;
    let fd = -1;
    let pid = 0;
    try {
      mkdirSync(dir, { mode: 0o700 });
      const fifo = join(dir, "fifo");
      const pidFile = join(dir, "pid");
      let exited = false;
      const holder = spawnTool({ cmd: "unshare", args: ["--user", "--net", "--", "sh", "-c", HOLDER_SCRIPT, "sh", fifo, pidFile], timeoutMs: HOLDER_MS, nice: this.nice });
      void holder.then(
        (r) => {
          exited = true;
          if (r.code !== 0 && fd < 0) this.log.warn({ code: r.code, err: r.stderr.trim().slice(-500) }, "a spare slot's holder failed");
        },
        () => (exited = true),
      ).finally(() => {
        const s = this.ready.find((x) => x.id === id);
        if (s) s.gone = true;
      });
      pid = await readPid(pidFile, () => exited);
      // the holder's namespaces get the sandboxes' mapping before anything uses them
      writeFileSync(`/proc/${pid}/uid_map`, `0 ${MAPPED_ROOT} ${MAPPED_RANGE}\n`);
      writeFileSync(`/proc/${pid}/gid_map`, `0 ${MAPPED_ROOT} ${MAPPED_RANGE}\n`);
      fd = await openFifo(fifo, () => exited);
      const inodes = namespaceInodes(pid);
      slot = this.wiring.claim(id, veth);
      await this.wiring.attach(slot, veth, pid);
      if (exited) throw new Error("the holder exited");
      // for whoever looks at the data dir: this spare can be taken
      writeFileSync(join(dir, "ready"), "");
      return { id, slot, veth, pid, fd, inodes, gone: false };
    } catch (err) {
      if (fd >= 0) closeSync(fd);
      else releaseFifo(join(dir, "fifo"));
      rmSync(dir, { recursive: true, force: true });
      if (slot) await this.wiring.discard(id).catch(() => undefined);
      this.live.delete(id);
      throw err;
    }
  }

  private async drop(s: Spare): Promise<void> {
    if (s.fd >= 0) closeSync(s.fd);
    s.fd = -1;
    rmSync(join(this.dir, s.id), { recursive: true, force: true });
    await this.wiring.discard(s.id).catch((err: Error) => this.log.warn({ err: err.message }, "removing a spare network slot failed"));
    this.live.delete(s.id);
  }
}

/** The inode numbers of the user and network namespaces of `pid`. */
function namespaceInodes(pid: number): [number, number] {
  return [statSync(`/proc/${pid}/ns/user`).ino, statSync(`/proc/${pid}/ns/net`).ino];
}

/** Whether the spare's PID still has the namespaces it was wired with. */
function sameNamespaces(s: Spare): boolean {
  try {
    const [u, n] = namespaceInodes(s.pid);
    return !s.gone && u === s.inodes[0] && n === s.inodes[1];
  } catch {
    return false;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The PID the holder wrote, once it has (its namespaces are made by then). */
async function readPid(file: string, exited: () => boolean): Promise<number> {
  for (let i = 0; i < 2000; i++) {
    if (exited()) throw new Error("the holder exited before it was ready");
    try {
      const pid = Number(readFileSync(file, "utf8").trim());
      if (pid > 0) return pid;
    } catch {
      // not written yet
    }
    await sleep(5);
  }
  throw new Error("the holder did not start within 10 s");
}

/** Opens the write end of the holder's FIFO once the holder has opened its read end. */
async function openFifo(fifo: string, exited: () => boolean): Promise<number> {
  for (let i = 0; i < 2000; i++) {
    if (exited()) throw new Error("the holder exited before it was ready");
    try {
      return openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENXIO") throw err;
    }
    await sleep(5);
  }
  throw new Error("the holder did not open its FIFO within 10 s");
}

/** Lets a holder still waiting to open its FIFO go (a predecessor crashed before opening the write end). */
function releaseFifo(fifo: string): void {
  try {
    closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
  } catch {
    // no reader (or no FIFO): nothing waits on it
  }
}
