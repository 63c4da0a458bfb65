import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { Process, Signal, type ConnectRequest, type StartRequest } from "../gen/process/process_pb.js";
import type { Deps } from "../deps.js";
import { userOrDefault } from "../auth/identity.js";
import type { DirectStreams, StreamCall } from "../stream/contract.js";
import { applyInput, streamInput } from "./input.js";
import { plan } from "./plan.js";
import { ProcessRegistry } from "./registry.js";
import { startProcess } from "./start.js";
import { eventsOf, processEvents, streamCall } from "./stream.js";
import { findExecTools } from "./wrapper.js";

// The reference answers other signals with unimplemented; a bad enum value is bad input,
// so it is invalid_argument here (the SDKs only ever send SIGKILL).
const SIGNALS: Partial<Record<Signal, NodeJS.Signals>> = { [Signal.SIGTERM]: "SIGTERM", [Signal.SIGKILL]: "SIGKILL" };

/** process.Process: thin table of RPCs; the work lives in the helpers beside this file. */
export function createProcessService(deps: Deps): ServiceImpl<typeof Process> & { streams: DirectStreams; close(): Promise<void> } {
  const registry = new ProcessRegistry(deps.config.maxProcesses);
  const tools = findExecTools();
  const path = process.env.PATH ?? "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  if (!tools.setpriv) deps.log.warn("setpriv not found: processes will run without their supplementary groups");

  const streams = {
    start(req: StartRequest, call: StreamCall) {
      const open = async () => {
        const receivedAt = performance.now();
        const user = userOrDefault(call.user, deps);
        const spawnPlan = await plan(req, {
          user,
          injectedEnv: deps.state.envs.all(),
          defaultWorkdir: deps.state.defaultWorkdir,
          timeoutHeader: call.header("connect-timeout-ms"),
          path,
        });
        const { handle, events } = await startProcess(req, spawnPlan, tools, registry, receivedAt, call.signal);
        deps.log.debug({ pid: handle.pid, pty: handle.isPty, tag: handle.tag }, "process started");
        return { pid: handle.pid, events };
      };
      return processEvents(open, call);
    },
    connect(req: ConnectRequest, call: StreamCall) {
      return processEvents(() => eventsOf(registry.find(req.process)), call);
    },
  };

  return {
    /** Start and Connect for direct-stream.ts. */
    streams: streams as DirectStreams,

    list() {
      const processes = registry.list().map((h) => ({ config: h.config, pid: h.pid, tag: h.tag }));
      return { processes };
    },

    start: (req, ctx) => streams.start(req, streamCall(ctx)),

    connect: (req, ctx) => streams.connect(req, streamCall(ctx)),

    async sendInput(req) {
      await applyInput(registry.findLive(req.process), req.input);
      return {};
    },

    async streamInput(requests) {
      await streamInput(requests, registry);
      return {};
    },

    async sendSignal(req) {
      const sig = SIGNALS[req.signal];
      if (!sig) throw new ConnectError(`invalid signal: SIGNAL_${Signal[req.signal] ?? req.signal}`, Code.InvalidArgument);
      await registry.findLive(req.process).signal(sig);
      return {};
    },

    closeStdin(req) {
      registry.findLive(req.process).closeStdin();
      return {};
    },

    update(req) {
      const handle = registry.findLive(req.process);
      const size = req.pty?.size;
      if (req.pty) handle.resize(size?.cols ?? 0, size?.rows ?? 0);
      return {};
    },

    async close() {
      registry.close();
      for (const h of registry.list()) h.release();
    },
  };
}
