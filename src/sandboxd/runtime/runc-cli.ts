import { closeSync, openSync, readdirSync, readFileSync } from "node:fs";
import { execTool, mustExec } from "../host/exec.js";
import { spawnTool } from "../host/spawner.js";
import { SET_OOM_FLOOR, withOomFloor } from "../host/oom.js";

/** One container as `runc list` reports it. */
export interface RuncContainer {
  id: string;
  pid: number;
  status: "created" | "running" | "paused" | "stopped" | string;
}

/** The runc command line bound to one state root (`--root`), so instances never see each other. */
export class RuncCli {
  constructor(private readonly root: string) {}

  /**
   * `runc run --detach`: makes the container and its namespaces and starts its init (one runc
   * process where `create` and `start` took two: each runc start costs tens of milliseconds of CPU).
   * The container's stdout/stderr (and runc's own errors) go to `logFile`, which outlives runc.
   * With `rootfs`, its overlay is mounted at the bundle's rootfs path in a private mount namespace
   * that only runc (and so only the container's own namespace, copied from it) ever sees: the
   * sandbox's setuid files work inside (sudo) while the host has no mount of them to run. runc
   * starts with the sandboxes' OOM floor, which its container inherits. No session keyring is
   * made per container (`--no-new-keyring`): every sandbox runs as the same host uid, whose kernel
   * key quota (200 keys by default) would otherwise cap a host at 200 sandboxes; the sandbox's
   * seccomp profile refuses the keyring calls (keyctl, add_key, request_key) anyway.
   */
  async run(id: string, bundle: string, pidFile: string, logFile: string, rootfs?: { options: string; target: string }, nice?: number): Promise<void> {
    const fd = openSync(logFile, "a", 0o600);
    const runc = ["runc", "--root", this.root, "run", "--detach", "--no-new-keyring", "--bundle", bundle, "--pid-file", pidFile, id];
    // nice applies to the mount only: the container's processes must not inherit it
    const mount = `${nice ? `nice -n ${Math.trunc(nice)} ` : ""}mount -t overlay overlay -o "$1" "$2"`;
    // one shell, already in the private namespace, sets the OOM floor, mounts and becomes runc
    const script = `${SET_OOM_FLOOR} && ${mount} && shift 2 && exec "$@"`;
    const argv = rootfs ? ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", rootfs.options, rootfs.target, ...runc] : withOomFloor(runc);
    try {
      // 'exit', not 'close': the container keeps the log file open after runc has gone
      const { code } = await spawnTool({ cmd: argv[0], args: argv.slice(1), fds: [fd, fd], timeoutMs: 60_000 }).catch((err: Error) => {
        throw /is not installed/.test(err.message) ? new Error(`${argv[0]} is not installed (apt-get install runc util-linux)`) : err;
      });
      if (code !== 0) throw new Error(`runc run ${id} failed (exit ${code ?? "by signal"})`);
    } finally {
      closeSync(fd);
    }
  }

  /** Runs one runc verb on a container and rejects with runc's message when it fails. */
  async verb(verb: string, id: string, ...extra: string[]): Promise<void> {
    await mustExec("runc", ["--root", this.root, verb, ...extra, id]);
  }

  /** The container's state, or undefined when runc does not know it. */
  async state(id: string): Promise<RuncContainer | undefined> {
    const r = await execTool("runc", ["--root", this.root, "state", id]);
    if (r.code !== 0) return undefined;
    return JSON.parse(r.stdout) as RuncContainer;
  }

  /** Every container under this root. */
  async list(): Promise<RuncContainer[]> {
    const out = await mustExec("runc", ["--root", this.root, "list", "--format", "json"]);
    return (JSON.parse(out.trim() || "null") as RuncContainer[] | null) ?? [];
  }

  /**
   * Waits (at most `ms`) until no runc command on this state root runs in another process: after
   * sandboxd was killed, a `runc run` it had begun goes on and would otherwise make
   * a container just after the new process looked for leftovers.
   */
  async settle(ms = 10_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline && this.othersRunning()) await new Promise((r) => setTimeout(r, 50));
  }

  private othersRunning(): boolean {
    for (const pid of readdirSync("/proc")) {
      if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
      try {
        const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
        if (/(^|\/)runc$/.test(argv[0]) && argv[1] === "--root" && argv[2] === this.root) return true;
      } catch {
        // gone meanwhile
      }
    }
    return false;
  }

  /** Kills and deletes the container whatever its state; a missing one is fine. */
  async destroy(id: string): Promise<void> {
    const first = await execTool("runc", ["--root", this.root, "delete", "--force", id]);
    if (first.code === 0) return;
    const st = await this.state(id);
    if (!st) return;
    // a frozen container cannot die: thaw it so that SIGKILL is delivered, then delete again
    if (st.status === "paused") await execTool("runc", ["--root", this.root, "resume", id]);
    const r = await execTool("runc", ["--root", this.root, "delete", "--force", id]);
    if (r.code !== 0 && (await this.state(id))) throw new Error(`runc delete ${id} failed: ${r.stderr.trim()}`);
  }
}
