import { test } from "node:test";
import assert from "node:assert/strict";
import { lstat } from "node:fs/promises";
import { goPermissions, cachedNames } from "../../../src/envd/filesystem/entry-info.js";
import { compareNames } from "../../../src/envd/filesystem/list.js";
import { goError } from "../../../src/envd/filesystem/go-error.js";
import { isNetworkFs } from "../../../src/envd/filesystem/watch-validate.js";
import { newWatcherId } from "../../../src/envd/filesystem/watchers.js";
import { addonCandidates } from "../../../src/envd/platform/native-addon.js";

test("goPermissions renders Go's FileMode.String() letters and order", () => {
  assert.equal(goPermissions(0o100644), "-rw-r--r--");
  assert.equal(goPermissions(0o040755), "drwxr-xr-x");
  assert.equal(goPermissions(0o120777), "Lrwxrwxrwx");
  assert.equal(goPermissions(0o041777), "dtrwxrwxrwx");
  assert.equal(goPermissions(0o020666), "Dcrw-rw-rw-");
  assert.equal(goPermissions(0o060660), "Drw-rw----");
  assert.equal(goPermissions(0o010644), "prw-r--r--");
  assert.equal(goPermissions(0o140755), "Srwxr-xr-x");
  assert.equal(goPermissions(0o104755), "urwxr-xr-x");
  assert.equal(goPermissions(0o102755), "grwxr-xr-x");
  assert.equal(goPermissions(0o046755), "dugrwxr-xr-x");
  assert.equal(goPermissions(0o100000), "----------");
});

test("goPermissions agrees with a real /dev/null and /tmp", async () => {
  assert.equal(goPermissions((await lstat("/dev/null")).mode), "Dcrw-rw-rw-");
  assert.match(goPermissions((await lstat("/tmp")).mode), /^dtrwx/);
});

test("compareNames sorts by UTF-8 bytes like Go", () => {
  assert.deepEqual(["b", "B", "a", "_", "10", "9"].sort(compareNames), ["10", "9", "B", "_", "a", "b"]);
  // U+FF5E (3 UTF-8 bytes) sorts before U+1F600 (4 bytes, a surrogate pair in UTF-16).
  assert.deepEqual(["\u{1F600}", "\uFF5E"].sort(compareNames), ["\uFF5E", "\u{1F600}"]);
});

test("goError words fs errors like Go's PathError", async () => {
  const err = await lstat("/nonexistent/x").catch((e: unknown) => e);
  assert.equal(goError(err), "lstat /nonexistent/x: no such file or directory");
  assert.equal(goError(new Error("plain")), "plain");
});

test("cachedNames asks the database once per id", () => {
  let calls = 0;
  const names = cachedNames({ userName: (u) => (calls++, `u${u}`), groupName: (g) => `g${g}` });
  assert.equal(names.userName(5), "u5");
  assert.equal(names.userName(5), "u5");
  assert.equal(names.groupName(7), "g7");
  assert.equal(calls, 1);
});

test("network filesystem magic numbers", () => {
  for (const m of [0x6969, 0xff534d42, 0x517b, 0xfe534d42, 0x65735546, -11317950]) assert.ok(isNetworkFs(m), m.toString(16));
  for (const m of [0xef53, 0x01021994, 0x9123683e]) assert.ok(!isNetworkFs(m), m.toString(16));
});

test("watcher ids are w + 20 of [a-z0-9] and differ", () => {
  const ids = new Set(Array.from({ length: 200 }, newWatcherId));
  assert.equal(ids.size, 200);
  for (const id of ids) assert.match(id, /^w[a-z0-9]{20}$/);
});

test("addon lookup order: env dir, script dir, repo build beside it, /usr/lib/envd", () => {
  const list = addonCandidates({ ENVD_ADDON_DIR: "/opt/x" });
  assert.equal(list[0], "/opt/x/inotify.node");
  assert.ok(list.indexOf("/usr/lib/envd/inotify.node") > 0);
  assert.ok(list.some((p) => p.endsWith("native/build/Release/inotify.node")));
});

test("inotify_add_watch failures: the watch limit is resource_exhausted in plain words", async () => {
  const { addWatchError } = await import("../../../src/envd/filesystem/dir-watch.js");
  const { Code } = await import("@connectrpc/connect");
  const enospc = Object.assign(new Error("inotify_add_watch: No space left on device (ENOSPC)"), { code: "ENOSPC" });
  const e = addWatchError("/w/sub", enospc);
  assert.equal(e.code, Code.ResourceExhausted);
  assert.equal(e.rawMessage, "error adding path /w/sub to watcher: inotify watch limit reached");
  const other = addWatchError("/w", Object.assign(new Error("inotify_add_watch: Permission denied (EACCES)"), { code: "EACCES" }));
  assert.equal(other.code, Code.Internal);
  assert.match(other.rawMessage, /^error adding path \/w to watcher: .*Permission denied/);
});
