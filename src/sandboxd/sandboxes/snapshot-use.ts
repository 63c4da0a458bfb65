/**
 * Which snapshot images creates are copying right now: an image in use cannot be deleted, and one
 * retired (its snapshot deleted or named again) while in use is removed when the last create is done.
 */
export class SnapshotUse {
  private readonly held = new Map<string, number>();
  private readonly retired = new Set<string>();

  /** `remove` deletes an image's file from the runtime once nothing uses it. */
  constructor(private readonly remove: (image: string) => Promise<void>) {}

  /** Marks `image` in use by one more create. */
  hold(image: string): void {
    this.held.set(image, (this.held.get(image) ?? 0) + 1);
  }

  /** One create of `image` is done; a retired image left unused is removed. */
  async release(image: string): Promise<void> {
    const n = (this.held.get(image) ?? 1) - 1;
    if (n > 0) return void this.held.set(image, n);
    this.held.delete(image);
    if (this.retired.delete(image)) await this.remove(image);
  }

  /** Whether a create is copying `image` now. */
  busy(image: string): boolean {
    return this.held.has(image);
  }

  /** Removes `image` now, or when the creates using it are done. */
  async retire(image: string): Promise<void> {
    if (this.busy(image)) this.retired.add(image);
    else await this.remove(image);
  }
}
