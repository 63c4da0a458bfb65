// A stand-in sandboxd for crash tests: makes a runc runtime from argv and creates one sandbox,
// printing "created" when done; the test kills it with SIGKILL somewhere along the way.
import { createJsonLogger } from "../../../src/common/log.js";
import { createSlotNetwork } from "../../../src/sandboxd/network/slot-network.js";
import { createRuncRuntime } from "../../../src/sandboxd/runtime/runc.js";

const [dataDir, envdDir, networkCidr, rootfs, sandboxID] = process.argv.slice(2);
const log = createJsonLogger({ level: "silent", fd: 2, name: "test" });
const rt = createRuncRuntime({ dataDir, envdDir, network: createSlotNetwork({ dataDir, networkCidr, log }), log });
await rt.create({ sandboxID, templateID: "base", buildID: "test", rootfs, cpuCount: 1, memoryMB: 256, diskSizeMB: 1024 });
process.stdout.write("created\n");
