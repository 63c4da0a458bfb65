import { invalid, optInt } from "../api/validate.js";

/** Checks cpuCount and memoryMB as E2B does (1..32 vCPU, 1 or even; ≥ 128 MiB, even). */
export function resources(o: Record<string, unknown>): { cpuCount: number; memoryMB: number } {
  const cpuCount = optInt(o, "cpuCount") ?? 2;
  const memoryMB = optInt(o, "memoryMB") ?? 1024;
  if (cpuCount < 1) throw invalid(`CPU count must be at least 1, got ${cpuCount}`);
  if (cpuCount > 32 || (cpuCount !== 1 && cpuCount % 2 !== 0)) throw invalid(`CPU count must be 1 or an even number up to 32, got ${cpuCount}`);
  if (memoryMB < 128) throw invalid(`memory must be at least 128 MiB, got ${memoryMB}`);
  if (memoryMB % 2 !== 0) throw invalid(`memory must be an even number of MiB, got ${memoryMB}`);
  return { cpuCount, memoryMB };
}
