/**
 * Unpacks an image of an OCI layout with umoci: its layers applied in order (whiteouts and
 * opaque directories honoured), each blob checked against its digest as it is read, every file
 * belonging to the sandboxes' mapped ids (uid/gid n in the image → MAPPED_ROOT + n on the host), as
 * the base rootfs is.
 */
import { spawn } from "node:child_process";
import { MAPPED_RANGE, MAPPED_ROOT } from "../../host/idmap.js";

/** Unpacks image `img` of `layout` into `rootfs` (which must not exist yet). */
export function unpackImage(layout: string, rootfs: string, signal: AbortSignal, timeoutMs = 30 * 60_000): Promise<void> {
  const map = `0:${MAPPED_ROOT}:${MAPPED_RANGE}`;
  const args = ["--log", "error", "raw", "unpack", "--uid-map", map, "--gid-map", map, "--image", `${layout}:img`, rootfs];
  return new Promise((resolve, reject) => {
    const child = spawn("umoci", args, { stdio: ["ignore", "ignore", "pipe"], timeout: timeoutMs });
    let stderr = "";
    const kill = () => child.kill("SIGKILL");
    signal.addEventListener("abort", kill, { once: true });
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr = (stderr + d).slice(-8000)));
    child.once("error", (err: NodeJS.ErrnoException) => reject(new Error(err.code === "ENOENT" ? "umoci is not installed (apt-get install umoci)" : err.message)));
    child.once("close", (code, sig) => {
      signal.removeEventListener("abort", kill);
      if (code === 0) return resolve();
      if (signal.aborted) return reject(signal.reason instanceof Error ? signal.reason : new Error("aborted"));
      const why = (stderr.trim().split("\n").at(-1) ?? "").replace(/^\s*•\s*/, "").slice(0, 600);
      reject(new Error(`unpacking the image failed: ${sig ? `killed after ${Math.round(timeoutMs / 1000)} s` : why || `umoci exited with ${code}`}`));
    });
  });
}
