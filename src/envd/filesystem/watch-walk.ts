import { opendirSync, type Dir } from "node:fs";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { compareNames } from "./list.js";

/** Entries one slice of a walk visits before it yields to the event loop. */
export const SLICE_ENTRIES = 512;

/** Time one slice may take (checked every few entries) before it yields to the event loop. */
export const SLICE_MS = 4;

/** Directories with more entries than this are read on the thread pool instead of in the slice. */
export const SYNC_LIST_ENTRIES = 256;

/** What a walk does with what it finds. */
export interface WalkVisitor {
  /** Watches a directory before it is read; false skips it (gone, unreadable, or the watch ended). */
  enter(rel: string): boolean;
  /** One entry, announced before anything below it. */
  entry(rel: string): void;
  /** False once the walk should stop (the watch was closed or failed). */
  alive(): boolean;
}

interface Entry {
  readonly name: string;
  readonly dir: boolean;
}

interface Frame {
  readonly rel: string;
  readonly entries: Entry[];
  i: number;
}

/**
 * A lexical pre-order walk of a directory that appeared inside a recursive watch (names sorted
 * by bytes as the reference does), done in bounded slices: a tree of tens of thousands of
 * entries must not stall the daemon's event loop. Small trees finish within the first run().
 */
export class TreeWalk {
  private readonly stack: Frame[] = [];
  private start: string | undefined;

  constructor(
    private readonly root: string,
    rel: string,
    private readonly visitor: WalkVisitor,
  ) {
    this.start = rel;
  }

  /**
   * Walks on: undefined once the walk is over, else a promise to wait for (the slice is used up,
   * or a big directory is being read) before calling run() again.
   */
  run(): Promise<void> | undefined {
    const deadline = performance.now() + SLICE_MS;
    if (this.start !== undefined) {
      const rel = this.start;
      this.start = undefined;
      const reading = this.open(rel);
      if (reading) return reading;
    }
    let visited = 0;
    while (this.stack.length > 0 && this.visitor.alive()) {
      if (++visited > SLICE_ENTRIES || (visited % 32 === 0 && performance.now() > deadline)) return nextTurn();
      const top = this.stack[this.stack.length - 1];
      if (top.i >= top.entries.length) {
        this.stack.pop();
        continue;
      }
      const e = top.entries[top.i++];
      const child = top.rel + "/" + e.name;
      this.visitor.entry(child);
      if (e.dir) {
        const reading = this.open(child);
        if (reading) return reading;
      }
    }
    this.stack.length = 0;
    return undefined;
  }

  /** Watches and lists a directory onto the stack; a promise while a big one is read. */
  private open(rel: string): Promise<void> | undefined {
    if (!this.visitor.enter(rel)) return undefined;
    const abs = join(this.root, rel);
    const few = listFew(abs, SYNC_LIST_ENTRIES);
    if (few) {
      this.stack.push({ rel, entries: few, i: 0 });
      return undefined;
    }
    return listAll(abs).then((entries) => {
      this.stack.push({ rel, entries, i: 0 });
    });
  }
}

function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** A directory's entries, sorted, when it has at most `max` (undefined when more; [] when unreadable). */
function listFew(abs: string, max: number): Entry[] | undefined {
  let dir: Dir;
  try {
    dir = opendirSync(abs);
  } catch {
    return [];
  }
  const out: Entry[] = [];
  try {
    for (let d = dir.readSync(); d !== null; d = dir.readSync()) {
      if (out.length === max) return undefined;
      out.push({ name: d.name, dir: d.isDirectory() });
    }
  } catch {
    return sorted(out);
  } finally {
    try {
      dir.closeSync();
    } catch {
      // closing a directory stream only fails when it is already closed
    }
  }
  return sorted(out);
}

async function listAll(abs: string): Promise<Entry[]> {
  try {
    const dirents = await readdir(abs, { withFileTypes: true });
    return sorted(dirents.map((d) => ({ name: d.name, dir: d.isDirectory() })));
  } catch {
    return [];
  }
}

/** Sorts by the names' UTF-8 bytes: UTF-16 order is the same unless a name has surrogates. */
function sorted(entries: Entry[]): Entry[] {
  if (entries.some((e) => /[\uD800-\uDFFF]/.test(e.name))) return entries.sort((a, b) => compareNames(a.name, b.name));
  return entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
