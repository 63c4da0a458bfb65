// The routes of the sandbox's state: GET /health, /envs and /metrics.
import type { Deps } from "../deps.js";
import type { Route } from "../http/routes.js";
import type { MetricsSampler } from "./metrics.js";
import { answerHealth } from "../http/early.js";

/** GET /health, /envs and /metrics. */
export function sandboxRoutes(deps: Deps, metrics: MetricsSampler): Route[] {
  return [
    {
      method: "GET",
      path: "/health",
      exempt: true,
      handler: ({ res }) => answerHealth(res),
    },
    {
      method: "GET",
      path: "/envs",
      handler: ({ res }) => sendJson(res, deps.state.envs.all()),
    },
    {
      method: "GET",
      path: "/metrics",
      handler: async ({ res, log }) => {
        let body: unknown;
        try {
          body = metrics.sample();
        } catch (err) {
          log.warn({ err: String(err) }, "metrics collection failed");
          res.statusCode = 500;
          res.setHeader("Content-Type", "application/json");
          res.end();
          return;
        }
        sendJson(res, body);
      },
    },
  ];
}

function sendJson(res: Parameters<Route["handler"]>[0]["res"], value: unknown): void {
  const body = JSON.stringify(value) + "\n";
  res.statusCode = 200;
  res.setHeader("Content-Type", "application/json");
  res.setHeader("Cache-Control", "no-store");
  res.setHeader("Content-Length", Buffer.byteLength(body));
  res.end(body);
}
