import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { Process } from "../gen/process/process_pb.js";
import type { Deps } from "../deps.js";

const todo = (): never => {
  throw new ConnectError("not yet available in this build", Code.Unimplemented);
};

/** process.Process: thin table of RPCs; the work lives in the helpers beside this file. */
export function createProcessService(_deps: Deps): ServiceImpl<typeof Process> & { close(): Promise<void> } {
  return {
    list: todo,
    async *connect() {
      todo();
    },
    async *start() {
      todo();
    },
    update: todo,
    streamInput: todo,
    sendInput: todo,
    sendSignal: todo,
    closeStdin: todo,
    async close() {},
  };
}
