// A sandbox's identity files (hostname, hosts, resolv.conf, /.e2b), kept on its own disk and
// bind-mounted into it by runc.
import { closeSync, constants, fchmodSync, fchownSync, fstatSync, ftruncateSync, lstatSync, mkdirSync, openSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { MAPPED_ROOT } from "../host/idmap.js";

/** What a sandbox's identity files say. */
export interface IdentityParams {
  sandboxID: string;
  templateID: string;
  buildID: string;
  ip: string;
  nameserver?: string;
}

/** One bind mount of config.json. */
export interface BindMount {
  destination: string;
  type: "bind";
  source: string;
  options: string[];
}

/** The identity file names sandboxd writes, in `dir`. */
const NAMES = ["hostname", "hosts", "resolv.conf", "e2b"];

/**
 * The sandbox's own identity files: hostname and a hosts file that resolves it (sudo warns
 * otherwise), /.e2b with the template and build as E2B writes it, and resolv.conf naming the host
 * end (the firewall sends every DNS query to sandboxd's resolver). As Docker does, they are
 * written into `dir`, a directory sandboxd owns outside the rootfs, and bind-mounted in by runc,
 * which resolves each destination inside the container's root: nothing on the host follows a
 * link the template or the sandbox made (a template whose /etc is a link to a host directory
 * gets the files inside its own tree). They belong to sandbox root, which may edit them in place.
 * Files already there (a disk copied from a snapshot or kept by a stop) are rewritten in place,
 * so a new boot allocates no inode, block or directory entry for them on the disk.
 */
export function identityMounts(dir: string, p: IdentityParams): BindMount[] {
  const files: [string, string, string][] = [
    ["hostname", "/etc/hostname", `${p.sandboxID}\n`],
    ["hosts", "/etc/hosts", `127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n${p.ip}\t${p.sandboxID}\n`],
    ...(p.nameserver ? [["resolv.conf", "/etc/resolv.conf", `nameserver ${p.nameserver}\n`] as [string, string, string]] : []),
    ["e2b", "/.e2b", `ENV_ID=${p.templateID}\nTEMPLATE_ID=${p.templateID}\nBUILD_ID=${p.buildID}\n`],
  ];
  if (!isRealDir(dir)) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { mode: 0o755 });
  }
  for (const name of NAMES) if (!files.some(([n]) => n === name)) rmSync(join(dir, name), { force: true });
  return files.map(([name, destination, text]) => {
    writeInPlace(join(dir, name), Buffer.from(text));
    return { destination, type: "bind", source: join(dir, name), options: ["bind", "nosuid", "nodev", "noexec"] };
  });
}

/** An open descriptor for writing of the regular file at `path`, or undefined when there is none (nothing, a link, anything else). */
function openExisting(path: string): number | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_WRONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  if (fstatSync(fd).isFile()) return fd;
  closeSync(fd);
  return undefined;
}

function isRealDir(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Makes `path` a regular file holding `data`, mode 0644, owned by sandbox root: an existing
 * regular file is overwritten in place (its inode and block kept), anything else there (a link,
 * a directory, a special file) is removed first. Never follows a link.
 */
function writeInPlace(path: string, data: Buffer): void {
  let fd = openExisting(path);
  if (fd === undefined) {
    rmSync(path, { recursive: true, force: true });
    fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
  }
  try {
    for (let off = 0; off < data.length; ) off += writeSync(fd, data, off, data.length - off, off);
    // each change of size, mode or owner is a metadata write: made only when needed
    const st = fstatSync(fd);
    if (st.size !== data.length) ftruncateSync(fd, data.length);
    if ((st.mode & 0o7777) !== 0o644) fchmodSync(fd, 0o644);
    if (st.uid !== MAPPED_ROOT || st.gid !== MAPPED_ROOT) fchownSync(fd, MAPPED_ROOT, MAPPED_ROOT);
  } finally {
    closeSync(fd);
  }
}
