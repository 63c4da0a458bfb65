import { Code, ConnectError } from "@connectrpc/connect";
import type { FilesystemEvent } from "../gen/filesystem/filesystem_pb.js";

/**
 * Events a stream hands out before it lets the event loop run: a reader that never waits (the
 * response is written without back-pressure until the socket is full) would otherwise turn a
 * backlog of tens of thousands into one long turn.
 */
const EVENTS_PER_TURN = 256;

/**
 * The bounded queue between a watch and its reader: a stream that waits for events or a
 * poller that drains them. Overflow or any other failure is terminal and reported to the
 * reader, never a silent drop.
 */
export class EventBuffer {
  private queue: FilesystemEvent[] = [];
  private head = 0;
  private failure: ConnectError | undefined;
  private ended = false;
  private wake: (() => void) | undefined;

  constructor(private readonly max: number) {}

  /** The terminal error, once there is one. */
  get failed(): ConnectError | undefined {
    return this.failure;
  }

  /** True when one more event would overflow the buffer. */
  get full(): boolean {
    return this.queue.length - this.head >= this.max;
  }

  /** Appends an event; on overflow the buffer fails instead. Returns false when nothing was added. */
  push(ev: FilesystemEvent): boolean {
    if (this.failure || this.ended) return false;
    if (this.full) {
      this.fail(`event buffer overflow: more than ${this.max} events not yet read`);
      return false;
    }
    this.queue.push(ev);
    this.wake?.();
    return true;
  }

  /** Fails the buffer with `watcher error: <message>` (first failure wins). */
  fail(message: string): void {
    if (this.failure || this.ended) return;
    this.failure = new ConnectError(`watcher error: ${message}`, Code.Internal);
    this.wake?.();
  }

  /** Ends readers cleanly (the watch was closed). */
  end(): void {
    this.ended = true;
    this.wake?.();
  }

  /** Polling: every buffered event, clearing the buffer; a failed buffer throws its error every time. */
  drain(): FilesystemEvent[] {
    if (this.failure) throw this.failure;
    const out = this.queue.slice(this.head);
    this.queue = [];
    this.head = 0;
    return out;
  }

  /** Streaming: events as they come until ended or `signal` aborts; buffered events go out before a failure. */
  async *stream(signal: AbortSignal): AsyncGenerator<FilesystemEvent> {
    // One abort listener for the whole stream: adding and removing one per wait cost more than the event.
    const onAbort = (): void => this.wake?.();
    signal.addEventListener("abort", onAbort, { once: true });
    let inTurn = 0;
    try {
      for (;;) {
        while (this.head < this.queue.length) {
          if (++inTurn > EVENTS_PER_TURN) {
            await new Promise((resolve) => setImmediate(resolve));
            inTurn = 1;
            if (signal.aborted) return;
          }
          const ev = this.queue[this.head];
          this.queue[this.head++] = undefined as unknown as FilesystemEvent;
          if (this.head > 4096 && this.head * 2 > this.queue.length) {
            this.queue = this.queue.slice(this.head);
            this.head = 0;
          }
          yield ev;
        }
        if (this.failure) throw this.failure;
        if (this.ended || signal.aborted) return;
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
      }
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }
}
