import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { MAPPED_ROOT } from "../host/idmap.js";
import { writeFileInRoot } from "../host/in-root.js";

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

/**
 * The sandbox's own identity files: hostname and a hosts file that resolves it (sudo warns
 * otherwise), /.e2b with the template and build as E2B writes it, and resolv.conf naming the host
 * end (the firewall sends every DNS query to sandboxd's resolver). As Docker does, they are
 * written into `dir`, a directory sandboxd owns outside the rootfs, and bind-mounted in by runc,
 * which resolves each destination inside the container's root: nothing on the host follows a
 * link the template or the sandbox made (a template whose /etc is a link to a host directory
 * gets the files inside its own tree). They belong to sandbox root, which may edit them in place.
 */
export function identityMounts(dir: string, p: IdentityParams): BindMount[] {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { mode: 0o755 });
  const files: [string, string, string][] = [
    ["hostname", "/etc/hostname", `${p.sandboxID}\n`],
    ["hosts", "/etc/hosts", `127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n${p.ip}\t${p.sandboxID}\n`],
    ...(p.nameserver ? [["resolv.conf", "/etc/resolv.conf", `nameserver ${p.nameserver}\n`] as [string, string, string]] : []),
    ["e2b", "/.e2b", `ENV_ID=${p.templateID}\nTEMPLATE_ID=${p.templateID}\nBUILD_ID=${p.buildID}\n`],
  ];
  return files.map(([name, destination, text]) => {
    writeFileInRoot(dir, name, text, { mode: 0o644, uid: MAPPED_ROOT, gid: MAPPED_ROOT });
    return { destination, type: "bind", source: join(dir, name), options: ["bind", "nosuid", "nodev", "noexec"] };
  });
}
