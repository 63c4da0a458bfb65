import { test } from "node:test";
import assert from "node:assert/strict";
import { parseDockerfile } from "../../../src/sandboxd/templates/dockerfile.js";
import { dockerStartCmd, expandVars } from "../../../src/sandboxd/templates/docker-vars.js";

test("variables expand as Docker's: $X, ${X}, ${X:-d}, ${X:+a}, \\$ literal, unknown → empty", () => {
  const v = { A: "1", EMPTY: "" };
  assert.equal(expandVars("$A-${A}-${B:-d}-${A:+alt}-${EMPTY:-e}-${B:+x}-\\$A-$B.", v), "1-1-d-alt-e--$A-.");
});

test("a multi-stage Dockerfile becomes stages: FROM an earlier stage, COPY --from by name, number or image, global ARGs in FROM", () => {
  const p = parseDockerfile([
    "ARG V=3.12",
    "FROM python:${V}-slim AS deps",
    "ARG V",
    "ENV DIR=/deps/$V",
    "RUN mkdir -p $DIR",
    "FROM deps AS more",
    "COPY --from=deps ${DIR}/x /y",
    "FROM ubuntu:22.04",
    "COPY --from=more /y /z",
    "COPY --from=1 /y /w",
    "COPY --from=busybox:1 /bin/busybox /bin/",
    'ENTRYPOINT ["/bin/app"]',
    "CMD --serve",
  ].join("\n"));
  assert.equal(p.fromImage, "ubuntu:22.04");
  assert.deepEqual(p.stages?.map((s) => [s.name, s.fromImage, s.fromStage]), [["deps", "python:3.12-slim", undefined], ["more", undefined, 0], [undefined, "busybox:1", undefined]]);
  assert.deepEqual(p.stages?.[0].steps.map((s) => s.args), [["V", "3.12"], ["DIR", "/deps/3.12"], ["mkdir -p $DIR"]]);
  // a stage over another inherits its environment
  assert.deepEqual(p.stages?.[1].steps[0], { type: "COPY", args: ["/deps/3.12/x", "/y", "", ""], fromStage: 0 });
  assert.deepEqual(p.steps.slice(0, 3).map((s) => s.fromStage), [1, 1, 2]);
  assert.deepEqual(p.dockerStart, { entrypoint: ["/bin/app"], cmd: ["/bin/sh", "-c", "--serve"] });
  assert.deepEqual(p.steps.slice(-2).map((s) => s.type), ["USER", "WORKDIR"]);
});

test("Docker's start command: CMD under the image's ENTRYPOINT, ENTRYPOINT resets the image's CMD, neither → none", () => {
  assert.equal(dockerStartCmd({ cmd: ["--flag", "x y"] }, { entrypoint: ["/start.sh"], cmd: ["ignored"] }), "/start.sh --flag 'x y'");
  assert.equal(dockerStartCmd({ entrypoint: ["/bin/app"] }, { entrypoint: ["/x"], cmd: ["y"] }), "/bin/app");
  assert.equal(dockerStartCmd({}, { entrypoint: ["/x"], cmd: ["y"] }), undefined);
  assert.equal(dockerStartCmd({ cmd: ["/bin/sh", "-c", "echo $HOME"] }), "/bin/sh -c 'echo $HOME'");
});
