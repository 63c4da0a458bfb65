import { chownSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MAPPED_ROOT } from "./idmap.js";

/** Writes a file into the mounted sandbox rootfs, owned by sandbox root (replacing, never following, a symlink there). */
function put(root: string, path: string, text: string, mode = 0o644): void {
  const file = join(root, path);
  rmSync(file, { force: true });
  writeFileSync(file, text, { mode, flag: "wx" });
  chownSync(file, MAPPED_ROOT, MAPPED_ROOT);
}

/**
 * The sandbox's own identity files in its (overlay) rootfs: hostname and a hosts file that
 * resolves it (sudo warns otherwise), /.e2b with the template and build as E2B writes it, and
 * resolv.conf naming the host end (the firewall sends every DNS query to sandboxd's resolver).
 */
export function writeIdentity(root: string, p: { sandboxID: string; templateID: string; buildID: string; ip: string; nameserver?: string }): void {
  mkdirSync(join(root, "etc"), { recursive: true });
  put(root, "etc/hostname", `${p.sandboxID}\n`);
  put(root, "etc/hosts", `127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n${p.ip}\t${p.sandboxID}\n`);
  if (p.nameserver) put(root, "etc/resolv.conf", `nameserver ${p.nameserver}\n`);
  put(root, ".e2b", `ENV_ID=${p.templateID}\nTEMPLATE_ID=${p.templateID}\nBUILD_ID=${p.buildID}\n`);
}
