/**
 * The pulled-image cache of a sandboxd: its store, its puller and its pruning, which runs at
 * start and after every build, one sweep at a time.
 */
import type { Logger } from "../../log.js";
import { diskFreeAboveFloorMB } from "../../host/floors.js";
import { ImagePuller } from "./pull.js";
import type { RegistrySettings } from "./settings.js";
import { ImageStore } from "./store.js";

/** How long an image no build uses stays cached (when the disk is not short). */
export const DEFAULT_IMAGE_GRACE_MS = 24 * 3600_000;

/** Pulled images: where they are, how they are pulled, and the sweep that prunes them. */
export interface Images {
  store: ImageStore;
  puller: ImagePuller;
  sweep(): Promise<void>;
}

/** The image cache under `root`, pruned against the floor of the data dir's filesystem. */
export function imageSource(root: string, settings: RegistrySettings, dataDir: string, log: Logger): Images {
  const store = new ImageStore(root);
  const puller = new ImagePuller(store, settings);
  let running: Promise<void> | undefined;
  const sweep = async (): Promise<void> => {
    const removed = await store.sweep({
      graceMs: settings.imageGraceMs ?? DEFAULT_IMAGE_GRACE_MS,
      pressed: () => diskFreeAboveFloorMB(dataDir) < 0,
      pulling: puller.pulling,
    });
    if (removed.length > 0) log.info({ images: removed }, "pruned pulled images no build used lately");
  };
  return {
    store,
    puller,
    sweep: () => {
      running ??= sweep()
        .catch((err: Error) => log.warn({ err: err.message }, "pruning pulled images failed"))
        .finally(() => (running = undefined));
      return running;
    },
  };
}
