import { execTool } from "../host/exec.js";

/** The interface of the host's IPv4 default route, or undefined when it has none. */
export async function defaultRouteInterface(): Promise<string | undefined> {
  const r = await execTool("ip", ["-j", "-4", "route", "show", "default"]);
  if (r.code !== 0) return undefined;
  try {
    const routes = JSON.parse(r.stdout || "[]") as { dev?: string }[];
    return routes.find((x) => x.dev)?.dev;
  } catch {
    return undefined;
  }
}
