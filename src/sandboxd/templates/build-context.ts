/** What a build's executor is given: caches, where it works, the base images and its log. */
import type { Runtime } from "../runtime/runtime.js";
import type { BuildLogEntry } from "../store/builds.js";
import type { BaseFrom, BaseImage } from "./base-images.js";
import type { HeldFiles } from "./files.js";
import type { LayerCache } from "./layers.js";

/** What the executor needs from its surroundings. */
export interface ExecutorContext {
  cache: LayerCache;
  /** Where a build keeps its scratch files (stage mounts) while it runs (`<dir>/<buildID>`). */
  buildsDir: string;
  /** Where templates' root filesystems are published, by the key of the build's last step (`<dir>/<key>.stack`). */
  rootfsDir: string;
  /** Where each step's command runs (the runtime's run-once verb). */
  runtime: Pick<Runtime, "runOnce">;
  /** Who the build is for: part of every layer key, so no team is ever served (or learns of) another's layers. */
  scope: string;
  /** The SHA-256 of the stored upload of a COPY's files hash, or undefined when it was never uploaded. */
  filesDigest(filesHash: string): string | undefined;
  /** The unpacked files of that upload, held until released (undefined when gone). */
  holdFiles(filesHash: string, digest: string): Promise<HeldFiles | undefined>;
  /** The rootfs a fromImage or fromTemplate names, pulled if need be (throws a BuildFailure when none). */
  baseOf(from: BaseFrom, signal: AbortSignal): Promise<BaseImage>;
  log(e: Omit<BuildLogEntry, "timestamp">): void;
  stepTimeoutMs: number;
}
