// Preloaded into a daemon by `npm run bench -- --profile DIR` (NODE_OPTIONS=--require, because
// --cpu-prof is not allowed in NODE_OPTIONS): profiles the whole life of the process and writes
// DIR/envd-<pid>.cpuprofile at exit. The in-thread inspector session answers synchronously.
"use strict";
const inspector = require("node:inspector");
const { writeFileSync } = require("node:fs");
const { join } = require("node:path");
const dir = process.env.ENVD_BENCH_PROFILE_DIR;
if (dir) {
  const session = new inspector.Session();
  session.connect();
  session.post("Profiler.enable");
  session.post("Profiler.setSamplingInterval", { interval: 500 });
  session.post("Profiler.start");
  process.on("exit", () => {
    session.post("Profiler.stop", (err, res) => {
      if (!err) writeFileSync(join(dir, `envd-${process.pid}.cpuprofile`), JSON.stringify(res.profile));
    });
  });
}
