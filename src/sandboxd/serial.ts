/** Runs operations on one key one after another, in call order; `busy` tells whether a key has any pending. */
export interface Serializer {
  <T>(key: string, fn: () => Promise<T>): Promise<T>;
  /** Whether an operation on `key` is queued or running. */
  busy(key: string): boolean;
}

/** A serializer: a promise chain per key, dropped once the key's last operation settles. */
export function createSerializer(): Serializer {
  const tails = new Map<string, Promise<unknown>>();
  const run = <T>(key: string, fn: () => Promise<T>): Promise<T> => {
    const prev = tails.get(key) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => undefined);
    tails.set(key, tail);
    void tail.then(() => {
      if (tails.get(key) === tail) tails.delete(key);
    });
    return next;
  };
  return Object.assign(run, { busy: (key: string) => tails.has(key) });
}
