// debootstrap's output read into progress: the lines are those of Debian 12's debootstrap
// (functions and scripts/debian-common, plain mode); the whole build is tested for real in
// first-start-build.test.ts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { DebootstrapProgress, describeProgress, type BuildProgress } from "../../../src/sandboxd/images/progress.js";

const PKGS = ["base-files", "libc6", "bash", "python3", "curl"];
const TRANSCRIPT = [
  "I: Retrieving InRelease ", "I: Checking Release signature", "I: Valid Release signature (key id 4D64FEC119C2029067D6E791F8D2585B8783D481)",
  "I: Retrieving Packages ", "I: Validating Packages ", "I: Resolving dependencies of required packages...",
  "I: Checking component main on http://deb.debian.org/debian...",
  ...PKGS.flatMap((p) => [`I: Retrieving ${p} 1.0-1`, `I: Validating ${p} 1.0-1`]),
  "I: Chosen extractor for .deb packages: dpkg-deb",
  ...PKGS.slice(0, 3).map((p) => `I: Extracting ${p}...`),
  "I: Installing core packages...", "I: Unpacking required packages...",
  ...PKGS.slice(0, 3).map((p) => `I: Unpacking ${p}...`),
  "I: Configuring required packages...",
  ...PKGS.slice(0, 3).map((p) => `I: Configuring ${p}...`),
  "I: Unpacking the base system...",
  ...PKGS.slice(3).map((p) => `I: Unpacking ${p}...`),
  "I: Configuring the base system...",
  ...PKGS.slice(3).map((p) => `I: Configuring ${p}...`),
  "W: some warning", "I: Base system installed successfully.",
];

test("debootstrap's lines give downloads as a count, then unpack and configure steps of the package count with a growing percent", () => {
  const d = new DebootstrapProgress();
  const seen: BuildProgress[] = [d.current()];
  for (const line of TRANSCRIPT) {
    const p = d.line(line);
    if (p) seen.push(p);
  }
  const text = seen.map(describeProgress);
  assert.equal(text[0], "fetching package lists, 0%");
  assert.deepEqual(text.slice(1, 6), [1, 2, 3, 4, 5].map((n) => `downloading packages (${n} so far)`));
  assert.ok(text.includes("unpacking packages 1/5, 45%"), text.join("\n"));
  assert.ok(text.includes("configuring packages 5/5, 95%"), text.join("\n"));
  assert.equal(text.at(-1), "packages installed, 95%");
  const percents = seen.flatMap((p) => (p.percent === undefined ? [] : [p.percent]));
  assert.deepEqual(percents, [...percents].sort((a, b) => a - b));
  // Phase lines ("Unpacking the base system...") and Release/Packages files are not steps.
  assert.equal(seen.filter((p) => p.phase === "unpacking packages").length, 5);
});

test("lines that are not debootstrap's progress (hostile or garbled) move nothing", () => {
  const d = new DebootstrapProgress();
  for (const line of ["", "E: Couldn't download", "I:Retrieving x", "Retrieving x 1", "I: Unpacking", "I: Configuring  ", "\u0000I: Retrieving y 1"]) {
    assert.equal(d.line(line), undefined, JSON.stringify(line));
  }
  assert.deepEqual(d.current(), { phase: "fetching package lists", percent: 0 });
});
