/**
 * SDK-side scripts that time what the published SDK's user sees, split by undici's diagnostics
 * channels (the SDK's HTTP client publishes its connects): the create's 201, the TLS connect to
 * the sandbox's host, the first commands.run; and a running sandbox's commands.run through the
 * proxy beside the same call to envd reached directly (the SDK's `sandboxUrl`).
 */

/** Per round: create → 201, connect to the sandbox host, first run; prints one JSON line. */
export const SDK_BREAKDOWN = `
const { Sandbox } = await import("e2b");
const dc = await import("node:diagnostics_channel");
const n = Number(process.argv[1]);
const pauseMs = Number(process.argv[2] ?? 0);
const connects = [];
let started = new Map();
dc.subscribe("undici:client:beforeConnect", ({ connectParams: p }) => started.set(p.host, performance.now()));
dc.subscribe("undici:client:connected", ({ connectParams: p }) => connects.push({ host: p.host, ms: performance.now() - (started.get(p.host) ?? NaN), at: performance.now() }));
const rounds = [];
for (let i = 0; i < n; i++) {
  if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
  const t0 = performance.now();
  const sbx = await Sandbox.create();
  const t1 = performance.now();
  const r = await sbx.commands.run("true");
  const t2 = performance.now();
  if (r.exitCode !== 0) throw new Error("true exited " + r.exitCode);
  const again = performance.now();
  await sbx.commands.run("true");
  const t3 = performance.now();
  const c = connects.find((x) => x.host.includes(sbx.sandboxId) && x.at >= t1 && x.at <= t2);
  rounds.push({ id: sbx.sandboxId, createMs: t1 - t0, firstRunMs: t2 - t1, connectMs: c ? c.ms : null, secondRunMs: t3 - again, totalMs: t2 - t0 });
  await sbx.kill();
}
console.log(JSON.stringify(rounds));
`;

/**
 * On one sandbox: \`pairs\` commands.run('true') through the proxy and to envd directly,
 * interleaved (order alternating), after a warm-up of each; then, inside the sandbox, what a
 * login shell costs (\`bash -l -c true\` vs \`bash -c true\`, the mean of 50 each). Prints one JSON line.
 */
export const SDK_ROUNDTRIP = `
const { Sandbox } = await import("e2b");
const pairs = Number(process.argv[1]);
const sbx = await Sandbox.create();
try {
  const ip = (await sbx.commands.run("hostname -I")).stdout.trim().split(/\\s+/)[0];
  const direct = await Sandbox.connect(sbx.sandboxId, { sandboxUrl: "http://" + ip + ":49983" });
  const time = async (s) => { const t0 = performance.now(); const r = await s.commands.run("true"); if (r.exitCode !== 0) throw new Error("exit " + r.exitCode); return performance.now() - t0; };
  for (let i = 0; i < 30; i++) { await time(sbx); await time(direct); }
  const proxy = [], envd = [];
  for (let i = 0; i < pairs; i++) {
    if (i % 2) { proxy.push(await time(sbx)); envd.push(await time(direct)); }
    else { envd.push(await time(direct)); proxy.push(await time(sbx)); }
  }
  const loop = (flags) => "s=$(date +%s%N); for i in $(seq 50); do bash " + flags + " -c true; done; e=$(date +%s%N); echo $(( (e - s) / 50000 ))";
  const shell = {};
  for (const [k, f] of [["login", "-l"], ["plain", ""], ["login2", "-l"], ["plain2", ""]]) shell[k] = Number((await direct.commands.run(loop(f))).stdout.trim()) / 1000;
  console.log(JSON.stringify({ proxy, envd, shell: { login: (shell.login + shell.login2) / 2, plain: (shell.plain + shell.plain2) / 2 } }));
} finally {
  await sbx.kill();
}
`;
