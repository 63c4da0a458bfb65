/**
 * Reused read buffers for process output. Node gives every pipe read a fresh 64 KiB
 * ArrayBuffer; at hundreds of MiB/s that external memory, not the JS heap, is what drives V8
 * into a full mark-compact every ~30 MiB. Here reads land in 1 MiB slabs taken from a pool:
 * each read fills the next free part of the current slab and leaves as a view of it (no copy),
 * and a slab goes back to the pool once it is full and every view of it was written out.
 *
 * Who may still read a view decides when a slab is reused, so the count is conservative: a
 * read holds its slab until it is published; each subscriber that queues an event holds the
 * event's slabs until its frame writer reports the bytes handed to the kernel. A holder that
 * never reports (a subscriber cut off, the generic protobuf path, a dropped stream) keeps the
 * slab out of the pool for good, and the garbage collector frees it like any other buffer.
 */

import { BufferPool } from "../platform/buffer-pool.js";

const SLAB_BYTES = 1024 * 1024;

/** A read is offered at least this much room; a slab with less left is retired. */
const MIN_READ_BYTES = 64 * 1024;

/** Free slabs kept for reuse, shared by all processes (see BufferPool). */
const pool = new BufferPool(SLAB_BYTES, 16);

class Slab {
  readonly buf = pool.take();
  used = 0;
  refs = 0;
  retired = false;
  /** Given back to the pool (once only, whatever the counts say). */
  pooled = false;
}

function unref(slab: Slab, n: number): void {
  slab.refs -= n;
  if (slab.refs === 0 && slab.retired && !slab.pooled) {
    slab.pooled = true;
    pool.give(slab.buf);
  }
}

/** Slabs currently free for reuse (for tests). */
export function freeSlabCount(): number {
  return pool.freeCount;
}

/**
 * The slabs under a group of reads. `hold(n)` adds n holders to each, `release()` removes one;
 * a released lease must not be read from again by whoever released it.
 */
export class Lease {
  constructor(private readonly slabs: readonly Slab[]) {}

  hold(n: number): void {
    if (n > 0) for (const s of this.slabs) s.refs += n;
  }

  release(): void {
    for (const s of this.slabs) unref(s, 1);
  }
}

/** Reads of one pipe in arrival order (views of slabs or copies), with the lease on the slabs (none when all are copies). */
export interface SlabReads {
  reads: Buffer[];
  lease: Lease | undefined;
  /** Drops the reads' own hold: call once the events built from them are queued. */
  published(): void;
}

/** Reads below this size are copied out of the shared buffer; one this big turns slabs on. */
const BULK_READ_BYTES = 16 * 1024;

/**
 * Where every pipe in trickle mode reads into. Sharing it is safe: a read is copied out in the
 * callback that reports it, before the loop can start another read.
 */
let shared: Buffer | undefined;

/**
 * The `onread` side of one output pipe: `buffer()` offers where the next read goes, `took(n)`
 * records a read of n bytes into it, and `drain()` hands over the reads so far.
 *
 * A quiet pipe (small reads) reads into one buffer shared by all pipes and each read is copied
 * out, as Node itself does: an idle process holds no memory of its own. A read of
 * BULK_READ_BYTES or more switches the pipe to slabs; a turn that brings less than that
 * switches it back. Until they are published, slab reads hold their slabs once per slab.
 */
export class SlabReader {
  private slab: Slab | undefined;
  private offered: Buffer | undefined;
  private reads: Buffer[] = [];
  private slabs: Slab[] = [];
  private bytes = 0;
  /** The last turn brought little: leave the slabs at the next offer. */
  private quiet = false;

  /** The buffer the next read goes into. */
  buffer(): Buffer {
    // Retired only here, when Node takes a new buffer: the one offered before may already be its target.
    if (this.slab && this.quiet) this.retire();
    else if (this.slab && SLAB_BYTES - this.slab.used < MIN_READ_BYTES) {
      this.retire();
      this.slab = new Slab();
    }
    if (!this.slab) return (this.offered = shared ??= Buffer.allocUnsafeSlow(MIN_READ_BYTES));
    return (this.offered = this.slab.buf.subarray(this.slab.used));
  }

  /** `n` bytes were read into the buffer last offered; returns them (a view of a slab, or a copy). */
  took(n: number): Buffer {
    const slab = this.slab;
    let read: Buffer;
    if (slab && this.offered?.buffer === slab.buf.buffer) {
      read = slab.buf.subarray(slab.used, slab.used + n);
      slab.used += n;
      if (this.slabs[this.slabs.length - 1] !== slab) {
        slab.refs++;
        this.slabs.push(slab);
      }
    } else {
      read = Buffer.from(this.offered!.subarray(0, n));
      if (n >= BULK_READ_BYTES) {
        this.slab = new Slab();
        this.quiet = false;
      }
    }
    this.reads.push(read);
    this.bytes += n;
    return read;
  }

  /** True when reads wait to be drained. */
  get pending(): boolean {
    return this.reads.length > 0;
  }

  /** Bytes read and not yet drained. */
  get pendingBytes(): number {
    return this.bytes;
  }

  /** The reads so far and their lease; a quiet turn puts the pipe back on the shared buffer. */
  drain(): SlabReads {
    const { reads, slabs } = this;
    this.quiet = this.bytes < BULK_READ_BYTES;
    this.reads = [];
    this.slabs = [];
    this.bytes = 0;
    // Copies only (a quiet pipe): no lease, so the events take the plain single-read shape.
    if (slabs.length === 0) return { reads, lease: undefined, published: () => undefined };
    return { reads, lease: new Lease(slabs), published: () => slabs.forEach((s) => unref(s, 1)) };
  }

  /** The pipe is done: its slab is retired (reused once its views are released). */
  close(): void {
    if (this.slab) this.retire();
  }

  private retire(): void {
    const slab = this.slab!;
    this.slab = undefined;
    slab.retired = true;
    slab.refs++; // balanced at once: pools the slab now if nothing holds it
    unref(slab, 1);
  }
}
