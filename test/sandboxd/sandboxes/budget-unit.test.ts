import { test } from "node:test";
import assert from "node:assert/strict";
import { statusOf } from "../../../src/sandboxd/api/errors.js";
import { admit, FREE_MIN_MEMORY_MB, THIN_MIN_FREE_MB, type Budget } from "../../../src/sandboxd/sandboxes/budget.js";
import { memoryAvailableAboveFloorMB } from "../../../src/sandboxd/host/floors.js";

const none = { memoryMB: 0, diskMB: 0 };
const need = { memoryMB: 1024, diskMB: 10240 };

test("without budgets, admission reads what the host has left: memory above its floor, disk above its floor", () => {
  let mem = FREE_MIN_MEMORY_MB;
  let disk = THIN_MIN_FREE_MB;
  const b: Budget = { host: {}, team: {}, maxSandboxMemoryMB: 8192, memoryFreeMB: () => mem, diskFreeMB: () => disk };
  // limits are not reserved: a thousand sandboxes' worth of limits is no reason to refuse
  admit(b, { memoryMB: 1_000_000, diskMB: 10_000_000 }, none, need);
  mem = FREE_MIN_MEMORY_MB - 1;
  assert.throws(() => admit(b, none, none, need), (e: Error) => statusOf(e) === 429 && /maximum memory .* available above the floor/.test(e.message));
  mem = 10_000;
  disk = -5;
  assert.throws(() => admit(b, none, none, need), (e: Error) => statusOf(e) === 429 && /maximum disk .* 0 MiB free above the floor/.test(e.message));
});

test("with budgets, limits and disks are reserved in full and the live readings are not asked", () => {
  const b: Budget = { host: { memoryMB: 2048, diskMB: 20480 }, team: {}, maxSandboxMemoryMB: 8192, memoryFreeMB: () => assert.fail("memory read"), diskFreeMB: () => assert.fail("disk read") };
  admit(b, { memoryMB: 1024, diskMB: 10240 }, none, need);
  assert.throws(() => admit(b, { memoryMB: 1025, diskMB: 0 }, none, need), /maximum memory .* 1025 of 2048 MiB/);
});

test("the memory floor: MemAvailable less max(2 GiB, a tenth of RAM)", () => {
  const info = (totalKiB: number, availKiB: number) => () => `MemTotal:       ${totalKiB} kB\nMemFree:        1 kB\nMemAvailable:   ${availKiB} kB\n`;
  assert.equal(memoryAvailableAboveFloorMB(info(24 * 1024 * 1024, 20 * 1024 * 1024)), 20 * 1024 - Math.ceil((24 * 1024) / 10));
  assert.equal(memoryAvailableAboveFloorMB(info(4 * 1024 * 1024, 1024 * 1024)), 1024 - 2048);
});
