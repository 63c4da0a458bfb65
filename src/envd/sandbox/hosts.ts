// The sandbox's /etc/hosts entry for the host's events service, as /init sets it.
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { isIP } from "node:net";

/** The name /init points at the host's events service. */
export const EVENTS_HOST = "events.e2b.local";

/** Returns `text` with every line for `name` replaced by one `ip name` line (comments and other entries kept). */
export function rewriteHosts(text: string, ip: string, name = EVENTS_HOST): string {
  const lines = text.split("\n");
  const kept = lines.filter((line) => {
    const fields = line.replace(/#.*/, "").trim().split(/\s+/);
    return !(fields.length > 1 && fields.slice(1).includes(name));
  });
  while (kept.length && kept[kept.length - 1] === "") kept.pop();
  kept.push(`${ip}        ${name}`);
  return kept.join("\n") + "\n";
}

/**
 * Maps events.e2b.local to `ip` in the hosts file (atomic rewrite; no-op when already right).
 * Synchronous, as /init's other small writes: a few KiB written once per start, where the first
 * asynchronous file operation would start libuv's thread pool (+1.7 MiB RSS) in every sandbox.
 */
export async function pointEventsHost(hostsFile: string, ip: string): Promise<boolean> {
  if (!isIP(ip)) return false;
  let current = "";
  try {
    current = readFileSync(hostsFile, "utf8");
  } catch {
    current = "";
  }
  const next = rewriteHosts(current, ip);
  if (next === current) return true;
  const tmp = `${hostsFile}.envd-${process.pid}.tmp`;
  writeFileSync(tmp, next, { mode: 0o644 });
  renameSync(tmp, hostsFile);
  return true;
}
