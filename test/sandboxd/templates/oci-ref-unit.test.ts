import { test } from "node:test";
import assert from "node:assert/strict";
import { parseImageRef, transportRef } from "../../../src/sandboxd/templates/oci/ref.js";
import { parseMirror } from "../../../src/sandboxd/templates/oci/settings.js";
import { pickPlatform } from "../../../src/sandboxd/templates/oci/manifest.js";
import { signEcrRequest } from "../../../src/sandboxd/templates/oci/ecr.js";
import { parseConfig } from "../../../src/sandboxd/config.js";

const D = "sha256:" + "ab".repeat(32);

test("image references normalize as Docker's: Hub short names, library/, hosts with ports, tags and digests", () => {
  const c = (t: string) => parseImageRef(t).canonical;
  assert.equal(c("ubuntu"), "docker.io/library/ubuntu:latest");
  assert.equal(c("ubuntu:22.04"), "docker.io/library/ubuntu:22.04");
  assert.equal(c("library/ubuntu:22.04"), "docker.io/library/ubuntu:22.04");
  assert.equal(c("docker.io/ubuntu"), "docker.io/library/ubuntu:latest");
  assert.equal(c("index.docker.io/library/python:3.12-slim"), "docker.io/library/python:3.12-slim");
  assert.equal(c("oven/bun:1.3"), "docker.io/oven/bun:1.3");
  assert.equal(c("localhost/foo"), "localhost/foo:latest");
  assert.equal(c("127.0.0.1:5000/a/b/c:v1"), "127.0.0.1:5000/a/b/c:v1");
  assert.equal(c(`ghcr.io/owner/img@${D}`), `ghcr.io/owner/img@${D}`);
  assert.equal(c(`python:3@${D}`), `docker.io/library/python:3@${D}`);
  assert.equal(parseImageRef("ubuntu:22.04").hub, true);
  assert.equal(parseImageRef("quay.io/x/y").hub, false);
  assert.equal(transportRef(parseImageRef("ubuntu:22.04"), "mirror.local:5000"), "docker://mirror.local:5000/library/ubuntu:22.04");
  assert.equal(transportRef(parseImageRef(`python:3@${D}`)), `docker://docker.io/library/python@${D}`);
  for (const bad of ["", "UPPER/case", "a//b", "img:", "img@sha256:xyz", "img:bad tag", ":tag", "host:5000/"]) {
    assert.throws(() => parseImageRef(bad), /invalid image reference/, bad);
  }
});

test("mirrors and registry flags: http mirrors are insecure, repeatable flags and comma-separated variables; the certs dir and the registry timeout", () => {
  assert.deepEqual(parseMirror("http://127.0.0.1:5000/"), { host: "127.0.0.1:5000", insecure: true });
  assert.deepEqual(parseMirror("https://mirror.gcr.io"), { host: "mirror.gcr.io", insecure: false });
  assert.throws(() => parseMirror("ftp://x"), /http:\/\/ or https:\/\//);
  assert.throws(() => parseMirror("https://u:p@x"), /without credentials/);
  const r = parseConfig(["serve", "--registry-mirror", "http://a:1", "--registry-mirror", "https://b", "--insecure-registry", "r:5000"], { SANDBOXD_INSECURE_REGISTRIES: "ignored:1" }, "t");
  assert.ok("config" in r);
  assert.deepEqual(r.config.registry.mirrors.map((m) => m.host), ["a:1", "b"]);
  assert.deepEqual([...r.config.registry.insecure], ["r:5000"]);
  const e = parseConfig(["serve"], { SANDBOXD_REGISTRY_MIRRORS: "http://m1:5000, https://m2", SANDBOXD_INSECURE_REGISTRIES: "x:1,y:2" }, "t");
  assert.ok("config" in e);
  assert.deepEqual(e.config.registry.mirrors, [{ host: "m1:5000", insecure: true }, { host: "m2", insecure: false }]);
  assert.deepEqual([...e.config.registry.insecure], ["x:1", "y:2"]);
  const bad = parseConfig(["serve", "--insecure-registry", "a b"], {}, "t");
  assert.ok("print" in bad && /--insecure-registry must be host\[:port\]/.test(bad.print));
  assert.equal(e.config.registry.timeoutMs, 60_000);
  assert.equal(e.config.registry.certsDir, undefined);
  const t = parseConfig(["serve", "--registry-timeout", "7", "--registry-certs-dir", "/etc/sandboxd/certs.d"], {}, "t");
  assert.ok("config" in t);
  assert.equal(t.config.registry.timeoutMs, 7000);
  assert.equal(t.config.registry.certsDir, "/etc/sandboxd/certs.d");
  for (const v of ["0", "5s", "1.5"]) {
    const badTimeout = parseConfig(["serve", "--registry-timeout", v], {}, "t");
    assert.ok("print" in badTimeout && /--registry-timeout must be a whole number of seconds/.test(badTimeout.print), v);
  }
});

test("a multi-arch index picks linux/<this arch>, skipping attestations; none names what it has", () => {
  const entry = (os: string, architecture: string, n: string) => ({ digest: `sha256:${n.repeat(64)}`, size: 1, platform: { os, architecture } });
  const list = [entry("unknown", "unknown", "0"), entry("linux", "arm64", "1"), entry("linux", "amd64", "2")];
  assert.equal(pickPlatform(list, "amd64").digest, `sha256:${"2".repeat(64)}`);
  assert.throws(() => pickPlatform(list, "s390x"), /no linux\/s390x variant \(it has: linux\/arm64, linux\/amd64\)/);
});

test("ECR requests are signed with AWS Signature Version 4 (the documented example key)", () => {
  const { headers } = signEcrRequest({ accessKeyId: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", region: "us-east-1" }, "{}", new Date("2015-08-30T12:36:00Z"));
  assert.equal(headers["x-amz-date"], "20150830T123600Z");
  assert.match(headers.authorization, /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/20150830\/us-east-1\/ecr\/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=[0-9a-f]{64}$/);
});
