// Helpers of the image tests (test/image-*.test.ts): build the artifact, prepare a Debian root
// filesystem with envd installed, boot it with systemd-nspawn, and tear everything down again.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { accessSync, constants, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { arch } from "node:os";
import { delimiter, join } from "node:path";
import { ROOT } from "./daemon.js";

/** Our version, as package.json says. */
export const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
/** Name of the artifact (and of the directory inside its tarball). */
export const ARTIFACT_NAME = `envd-${VERSION}-linux-${arch()}`;

/** Finds an executable on PATH (plus the sbin dirs); undefined when absent. */
export function which(cmd: string): string | undefined {
  const dirs = [...(process.env.PATH ?? "").split(delimiter), "/usr/sbin", "/sbin", "/usr/bin", "/bin"];
  for (const d of dirs) {
    if (!d) continue;
    try {
      accessSync(join(d, cmd), constants.X_OK);
      return join(d, cmd);
    } catch {
      // keep looking
    }
  }
  return undefined;
}

/** Runs a command to completion; throws with its output when it fails. */
export function run(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): string {
  const r = spawnSync(cmd, args, { cwd: opts.cwd, env: opts.env ?? process.env, encoding: "utf8", timeout: opts.timeoutMs ?? 600_000, maxBuffer: 64 << 20 });
  if (r.status !== 0) {
    throw new Error(`${cmd} ${args.join(" ")} failed (${r.error?.message ?? `exit ${r.status ?? r.signal}`}):\n${(r.stdout ?? "").slice(-4000)}${(r.stderr ?? "").slice(-4000)}`);
  }
  return r.stdout;
}

/**
 * The artifact tarball: $ENVD_ARTIFACT when set, else the one `npm test` built before the tests
 * (`./build.sh --envd-artifact`) when it is newer than dist/envd, else built now. It is not rebuilt
 * under running tests: sandboxd's tests run sandboxes from the unpacked directory beside it.
 */
export function buildArtifact(): string {
  if (process.env.ENVD_ARTIFACT) return process.env.ENVD_ARTIFACT;
  const tarball = join(ROOT, "dist", `${ARTIFACT_NAME}.tar.gz`);
  const fresh = () => existsSync(tarball) && statSync(tarball).mtimeMs >= statSync(join(ROOT, "dist", "envd")).mtimeMs;
  if (!fresh()) run(process.execPath, [join(ROOT, "scripts", "package-sea.mjs")], { cwd: ROOT });
  if (!existsSync(tarball)) throw new Error(`the packaging step did not produce ${tarball}`);
  return tarball;
}

/** Unpacks the artifact into `dir`; returns the unpacked directory. */
export function unpackArtifact(tarball: string, dir: string): string {
  run("tar", ["-C", dir, "-xzf", tarball]);
  return join(dir, ARTIFACT_NAME);
}

/** Whether this process may hold CAP_SYS_RESOURCE (needed to lower an OOM score below 0); some VMs withhold it. */
export function hostHasSysResource(): boolean {
  const m = /^CapBnd:\s*([0-9a-f]+)$/m.exec(readFileSync("/proc/self/status", "utf8"));
  return !!m && (BigInt("0x" + m[1]) & (1n << 24n)) !== 0n;
}

/** A TCP port that is free on the host right now (dual-stack, as envd binds). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "::", () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/** Polls GET <url>/health until it answers 204; throws after `ms`. */
export async function waitHealthy(url: string, ms: number, why: () => string): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    try {
      const r = await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) });
      if (r.status === 204) return Date.now() - t0;
    } catch {
      // not up yet
    }
    if (Date.now() - t0 > ms) throw new Error(`envd did not become healthy at ${url} within ${ms} ms\n${why()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Unmounts everything mounted at or below `dir` (deepest first), then removes it without crossing mounts. */
export function removeTree(dir: string): void {
  const mounts = readFileSync("/proc/mounts", "utf8")
    .split("\n")
    .map((l) => l.split(" ")[1]?.replace(/\\040/g, " "))
    .filter((m): m is string => !!m && (m === dir || m.startsWith(dir + "/")))
    .sort()
    .reverse();
  for (const m of mounts) spawnSync("umount", ["-l", m]);
  spawnSync("rm", ["-rf", "--one-file-system", dir]);
}

/** Options for booting the image. */
export interface BootOptions {
  /** The cached root filesystem tar (scripts/package-rootfs.sh). */
  rootfsTar: string;
  /** The unpacked artifact directory (holds install.sh). */
  artifactDir: string;
  /** The port envd listens on (the container shares the host's network). */
  port: number;
}

/** A booted container: systemd as PID 1, envd started by its unit. */
export class Machine {
  private console = "";
  private readonly exited: Promise<number | null>;
  private constructor(
    readonly work: string,
    readonly rootDir: string,
    readonly name: string,
    readonly proc: ChildProcess,
  ) {
    const keep = (d: string) => {
      this.console = (this.console + d).slice(-20_000);
    };
    proc.stdout!.setEncoding("utf8").on("data", keep);
    proc.stderr!.setEncoding("utf8").on("data", keep);
    this.exited = new Promise((r) => proc.once("exit", (code) => r(code)));
  }

  /**
   * Extracts a fresh copy of the root filesystem under /var/tmp, installs envd with
   * `install.sh --root`, adds a drop-in with the test's port and defaults, and boots it.
   */
  static boot(opts: BootOptions): Machine {
    mkdirSync("/var/tmp", { recursive: true });
    const work = mkdtempSync("/var/tmp/envd-image-");
    try {
      const rootDir = join(work, "root");
      mkdirSync(rootDir);
      run("tar", ["-C", rootDir, "--numeric-owner", "-xf", opts.rootfsTar]);
      run(join(opts.artifactDir, "install.sh"), ["--root", rootDir]);
      const dropIn = join(rootDir, "etc", "systemd", "system", "envd.service.d");
      mkdirSync(dropIn, { recursive: true });
      writeFileSync(
        join(dropIn, "test.conf"),
        "[Service]\n" +
          `Environment=ENVD_PORT=${opts.port} ENVD_DEFAULT_USER=user ENVD_DEFAULT_WORKDIR=/home/user ENVD_CLOCK=off\n`,
      );
      const name = `envd-test-${process.pid}-${Date.now().toString(36)}`;
      const proc = spawn(
        "systemd-nspawn",
        // CAP_SYS_RESOURCE, which nspawn drops by default, lets systemd apply the unit's OOMScoreAdjust=-1000 as on a VM.
        ["--register=no", "--keep-unit", "--quiet", "--console=read-only", ...(hostHasSysResource() ? ["--capability=CAP_SYS_RESOURCE"] : []),
          "-M", name, "-b", "-D", rootDir],
        { stdio: ["ignore", "pipe", "pipe"] },
      );
      return new Machine(work, rootDir, name, proc);
    } catch (err) {
      removeTree(work);
      throw err;
    }
  }

  /** The last 20 kB of the container's console and nspawn's messages. */
  logs(): string {
    return this.console;
  }

  /** Whether systemd-nspawn is still running. */
  get running(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** Host pid of the container's PID 1 (systemd), the only child of systemd-nspawn. */
  pid1(): number | undefined {
    const pid = this.proc.pid;
    if (!pid || !this.running) return undefined;
    try {
      const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean);
      return kids.length > 0 ? Number(kids[0]) : undefined;
    } catch {
      return undefined;
    }
  }

  /** Resolves with nspawn's exit code when it ends, or "timeout" after `ms`. */
  async waitExit(ms: number): Promise<number | null | "timeout"> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), ms)));
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Asks systemd for a clean poweroff (SIGRTMIN+4 to PID 1) and waits for nspawn to end. */
  async poweroff(ms = 30_000): Promise<number | null | "timeout"> {
    const pid1 = this.pid1();
    if (pid1) spawnSync("kill", ["-s", "RTMIN+4", String(pid1)]);
    return this.waitExit(ms);
  }

  /** Ends the container whatever its state (poweroff, then SIGKILL), and removes its files. */
  async destroy(): Promise<void> {
    if (this.running) {
      if ((await this.poweroff(20_000)) === "timeout") {
        const pid1 = this.pid1();
        if (pid1) process.kill(pid1, "SIGKILL"); // kills every process in the container's pid namespace
        this.proc.kill("SIGKILL");
        await this.waitExit(10_000);
      }
    }
    removeTree(this.work);
    rmSync(join("/run/systemd/nspawn/propagate", this.name), { recursive: true, force: true });
  }
}
