import { readFile, rename, writeFile, mkdir } from "node:fs/promises";
import { dirname } from "node:path";

/** Installs /init's CA bundle into the system trust store file, replacing the one it installed before. */
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
    const current = await readFile(this.bundlePath, "utf8");
    let body = current;
    if (this.last && body.includes(this.last)) body = body.replace(this.last, "");
    if (!body.includes(pem)) body = (body === "" || body.endsWith("\n") ? body : body + "\n") + pem;
    const tmp = `${this.bundlePath}.envd-${process.pid}.tmp`;
    await writeFile(tmp, body, { mode: 0o644 });
    await rename(tmp, this.bundlePath);
    await mkdir(dirname(this.certPath), { recursive: true });
    await writeFile(this.certPath, pem, { mode: 0o644 });
    this.last = pem;
  }
}
