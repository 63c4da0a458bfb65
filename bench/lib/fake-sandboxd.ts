/**
 * An in-process sandboxd over the fake runtime: the real store, sandbox service and API handler
 * behind a plain HTTP listener on 127.0.0.1, with sandboxes that cost no runc. Lets the API and
 * sandboxd's own footprint be measured at 1,000 sandboxes without loading the machine.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createJsonLogger } from "../../src/common/log.js";
import { createApiHandler } from "../../src/sandboxd/api/handler.js";
import { createSandboxService, type SandboxService } from "../../src/sandboxd/sandboxes/service.js";
import { DEFAULT_TEAM_ID, registerBaseTemplate, seed } from "../../src/sandboxd/store/seed.js";
import { openStore, type Store } from "../../src/sandboxd/store/store.js";
import type { TemplateService } from "../../src/sandboxd/templates/service.js";
import { FakeRuntime, fakeEnvd, type FakeEnvd } from "../../test/sandboxd/helpers/fake-runtime.js";

/** A running in-process sandboxd on the fake runtime. */
export interface FakeSandboxd {
  /** http://127.0.0.1:<port> */
  url: string;
  apiKey: string;
  store: Store;
  sandboxes: SandboxService;
  runtime: FakeRuntime;
  envd: FakeEnvd;
  /** Empties the fake runtime's and fake envd's records of calls (so churn measures sandboxd alone). */
  forgetCalls(): void;
  /** Creates sandboxes through the service (as POST /sandboxes does) until `n` run; returns their IDs. */
  grow(n: number): Promise<string[]>;
  close(): Promise<void>;
}

/** Starts one over a fresh store in a temp dir (removed by close). */
export async function startFakeSandboxd(): Promise<FakeSandboxd> {
  const dir = mkdtempSync(join(tmpdir(), "fake-sandboxd-"));
  const store = openStore(join(dir, "sandboxd.db"));
  const seeded = seed(store);
  if (!seeded.seeded) throw new Error("a fresh store was not seeded");
  store.teams.update(DEFAULT_TEAM_ID, { maxConcurrent: 100_000 });
  const templateID = registerBaseTemplate(store, { rootfs: join(dir, "rootfs"), envdVersion: "0.6.13" });
  const runtime = new FakeRuntime();
  const envd = fakeEnvd();
  const log = createJsonLogger({ level: "silent", fd: 2, name: "bench" });
  const sandboxes = createSandboxService({
    store, runtime, log, envd: envd.connect, warmPoolSize: 0, defaultTemplateID: templateID,
    budget: { host: {}, team: {}, maxSandboxMemoryMB: 8192 },
  });
  await sandboxes.reconcile();
  // the list and get routes never reach the template service
  const api = createApiHandler({ store, sandboxes, templates: {} as TemplateService, log });
  const server: Server = createServer({ keepAlive: true }, (req, res) => api(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const ids: string[] = [];
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    apiKey: seeded.apiKey,
    store,
    sandboxes,
    runtime,
    envd,
    forgetCalls() {
      runtime.calls.length = 0;
      envd.inits.length = 0;
      envd.commands.length = 0;
    },
    async grow(n) {
      while (ids.length < n) {
        const i = ids.length;
        const body = await sandboxes.create(DEFAULT_TEAM_ID, { templateID: "base", timeout: 3600, secure: true, metadata: { user: `user-${i % 37}`, purpose: "bench", run: String(i) } });
        ids.push(body.sandboxID as string);
      }
      return [...ids];
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await sandboxes.close();
      store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
