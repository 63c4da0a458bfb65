/** `sandboxd setup`: installs the Debian packages the host check finds missing. */
import { spawnSync } from "node:child_process";
import { checkHost, describeMissing, findTool, installLine, type HostCheckOptions, type Missing } from "./prereqs.js";

/** Where `sandboxd setup` writes: the user's terminal. */
export interface SetupIO {
  out: NodeJS.WritableStream;
  err: NodeJS.WritableStream;
}

/** Runs apt-get with its output on the terminal; its exit status. */
function aptGet(args: string[], path: string): number {
  const r = spawnSync("apt-get", args, { stdio: ["ignore", "inherit", "inherit"], env: { ...process.env, PATH: path, DEBIAN_FRONTEND: "noninteractive" } });
  return r.status ?? 1;
}

/**
 * `sandboxd setup`: installs the Debian packages this host lacks (apt-get update, then one
 * apt-get install of exactly those), checks again and says what is still missing (kernel
 * features, disk, nsswitch.conf: nothing a package fixes). With `printOnly`, prints the
 * apt-get line and changes nothing. Exits 0 when the host is ready for `sandboxd serve`.
 */
export function runSetup(opts: HostCheckOptions & { printOnly?: boolean }, io: SetupIO): number {
  const path = opts.path ?? process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin";
  let missing: Missing[] = checkHost({ ...opts, path });
  const line = installLine(missing);
  if (opts.printOnly) {
    if (line) io.out.write(line + "\n");
    const other = missing.filter((m) => !m.pkg);
    if (other.length > 0) io.err.write(describeMissing(other));
    return missing.length === 0 ? 0 : 1;
  }
  if (line) {
    if (process.getuid?.() !== 0) {
      io.err.write(`sandboxd setup: installing packages needs root; run it with sudo, or run:\n  ${line}\n`);
      return 1;
    }
    if (!findTool("apt-get", path)) {
      io.err.write(`sandboxd setup: apt-get is not on PATH (this is not a Debian system?); install the equivalents of:\n  ${line}\n`);
      return 1;
    }
    io.out.write(`sandboxd setup: ${line}\n`);
    const update = aptGet(["update", "-q"], path);
    if (update !== 0) io.err.write(`sandboxd setup: apt-get update exited ${update}; installing from the lists there are\n`);
    const pkgs = line.split(" ").slice(4);
    const code = aptGet(["install", "-y", "-q", "--no-install-recommends", ...pkgs], path);
    if (code !== 0) {
      io.err.write(`sandboxd setup: apt-get install exited ${code}\n`);
      return 1;
    }
    missing = checkHost({ ...opts, path });
  }
  if (missing.length > 0) {
    io.err.write(describeMissing(missing));
    return 1;
  }
  io.out.write("sandboxd setup: this host has everything sandboxd needs; start it with 'sandboxd serve'\n");
  return 0;
}
