import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { Filesystem } from "../gen/filesystem/filesystem_pb.js";
import type { Deps } from "../deps.js";
import { requestUser } from "../auth/identity.js";
import { expandAndResolve } from "../auth/paths.js";
import { cachedNames, entryInfo } from "./entry-info.js";
import { listDir } from "./list.js";
import { makeDir, move, remove } from "./mutate.js";
import { WatcherRegistry } from "./watchers.js";
import { watchDirStream } from "./watch-stream.js";

/** filesystem.Filesystem: thin table of RPCs; the work lives in the helpers beside this file. */
export function createFilesystemService(deps: Deps): ServiceImpl<typeof Filesystem> & { close(): Promise<void> } {
  const watchers = new WatcherRegistry(deps.config.maxWatchers, deps.users, {
    idleMs: deps.config.watcherIdleTimeoutMs,
    onExpired: (id, idleMs) => deps.log.info({ watcherId: id, idleMs }, "polling watcher removed: not polled for the idle timeout"),
  });
  const resolve = (path: string, ctx: HandlerContext) => {
    const user = requestUser(ctx, deps);
    return { user, path: expandAndResolve(path, user, deps.state.defaultWorkdir) };
  };
  return {
    async stat(req, ctx) {
      const { path } = resolve(req.path, ctx);
      return { entry: entryInfo(path, deps.users) };
    },
    async makeDir(req, ctx) {
      const { user, path } = resolve(req.path, ctx);
      return { entry: await makeDir(path, user, deps.users) };
    },
    async move(req, ctx) {
      const { user, path: source } = resolve(req.source, ctx);
      const destination = expandAndResolve(req.destination, user, deps.state.defaultWorkdir);
      return { entry: await move(source, destination, user, deps.users) };
    },
    async listDir(req, ctx) {
      const { path } = resolve(req.path, ctx);
      return { entries: await listDir(path, req.depth, cachedNames(deps.users)) };
    },
    async remove(req, ctx) {
      const { user, path } = resolve(req.path, ctx);
      await remove(req.path, path, user);
      return {};
    },
    async *watchDir(req, ctx) {
      const { path } = resolve(req.path, ctx);
      yield* watchDirStream(watchers, path, req, ctx.requestHeader.get("keepalive-ping-interval"), ctx.signal);
    },
    async createWatcher(req, ctx) {
      const { path } = resolve(req.path, ctx);
      return { watcherId: await watchers.create(path, req) };
    },
    async getWatcherEvents(req) {
      return { events: watchers.events(req.watcherId) };
    },
    async removeWatcher(req) {
      watchers.remove(req.watcherId);
      return {};
    },
    close: () => watchers.close(),
  };
}
