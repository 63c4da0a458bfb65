import { readFile, writeFile, rename } from "node:fs/promises";
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

/** Maps events.e2b.local to `ip` in the hosts file (atomic rewrite; no-op when already right). */
export async function pointEventsHost(hostsFile: string, ip: string): Promise<boolean> {
  if (!isIP(ip)) return false;
  const current = await readFile(hostsFile, "utf8").catch(() => "");
  const next = rewriteHosts(current, ip);
  if (next === current) return true;
  const tmp = `${hostsFile}.envd-${process.pid}.tmp`;
  await writeFile(tmp, next, { mode: 0o644 });
  await rename(tmp, hostsFile);
  return true;
}
