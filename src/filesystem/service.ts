import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { Filesystem } from "../gen/filesystem/filesystem_pb.js";
import type { Deps } from "../deps.js";

const todo = (): never => {
  throw new ConnectError("not yet available in this build", Code.Unimplemented);
};

/** filesystem.Filesystem: thin table of RPCs; the work lives in the helpers beside this file. */
export function createFilesystemService(_deps: Deps): ServiceImpl<typeof Filesystem> {
  return {
    stat: todo,
    makeDir: todo,
    move: todo,
    listDir: todo,
    remove: todo,
    // eslint-disable-next-line require-yield
    async *watchDir() {
      todo();
    },
    createWatcher: todo,
    getWatcherEvents: todo,
    removeWatcher: todo,
  };
}
