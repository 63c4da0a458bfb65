// A stand-in sandboxd for crash tests: makes a runc runtime from argv and creates one sandbox,
// printing "created" when done; the test kills it with SIGKILL somewhere along the way.
import { createJsonLogger } from "../../../src/common/log.js";
import { createSlotNetwork } from "../../../src/sandboxd/network/slot-network.js";
import { createRuncRuntime } from "../../../src/sandboxd/runtime/runc.js";
import { StoragePool } from "../../../src/sandboxd/storage/pool.js";

const [dataDir, envdDir, networkCidr, rootfs, sandboxID] = process.argv.slice(2);
const log = createJsonLogger({ level: "silent", fd: 2, name: "test" });
// the test's own runtime has the pool mounted already: this one finds it there
const storage = await StoragePool.open({ dataDir, backing: "loop", sizeMB: 4096, log });
const rt = createRuncRuntime({ dataDir, envdDir, network: createSlotNetwork({ dataDir, networkCidr, spares: Number(process.env.SANDBOXD_SPARE_SLOTS ?? 0), log }), storage, log });
await rt.create({ sandboxID, templateID: "base", buildID: "test", rootfs, cpuCount: 1, memoryMB: 256, diskSizeMB: 1024 });
process.stdout.write("created\n");
