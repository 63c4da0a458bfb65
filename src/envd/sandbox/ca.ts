// The CA bundle /init installs into the sandbox's trust store.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

/**
 * Installs /init's CA bundle into the system trust store file, replacing the one it installed
 * before. The files are read and written synchronously (a trust store of ~200 KiB: about a
 * millisecond, once per start), so /init does not start libuv's thread pool (see hosts.ts).
 */
export class CaInstaller {
  private last: string | undefined;
  private busy: Promise<void> = Promise.resolve();

  constructor(
    private readonly bundlePath: string,
    private readonly certPath: string,
  ) {}

  /** Appends `pem` (normalised to one trailing newline) and removes the previously installed PEM. */
  install(pem: string): Promise<void> {
    const next = this.busy.then(() => this.apply(pem));
    this.busy = next.catch(() => undefined);
    return next;
  }

  private async apply(raw: string): Promise<void> {
    const pem = raw.replace(/\s+$/, "") + "\n";
    if (pem === this.last) return;
    const current = readFileSync(this.bundlePath, "utf8");
    let body = current;
    if (this.last && body.includes(this.last)) body = body.replace(this.last, "");
    if (!body.includes(pem)) body = (body === "" || body.endsWith("\n") ? body : body + "\n") + pem;
    const tmp = `${this.bundlePath}.envd-${process.pid}.tmp`;
    writeFileSync(tmp, body, { mode: 0o644 });
    renameSync(tmp, this.bundlePath);
    mkdirSync(dirname(this.certPath), { recursive: true });
    writeFileSync(this.certPath, pem, { mode: 0o644 });
    this.last = pem;
  }
}
