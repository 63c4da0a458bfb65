import { statSync } from "node:fs";
import { Code, ConnectError } from "@connectrpc/connect";
import type { StartRequest } from "../gen/process/process_pb.js";
import { unapplicableIds, type User } from "../auth/users.js";
import { expandAndResolve } from "../auth/paths.js";

/** Everything needed to spawn one process, validated. */
export interface SpawnPlan {
  readonly cmd: string;
  readonly args: string[];
  readonly env: Record<string, string>;
  readonly cwd: string;
  readonly user: User;
  /** Terminal size when the process runs on a PTY. */
  readonly pty?: { cols: number; rows: number };
  /** Whether a stdin pipe is opened (otherwise stdin is /dev/null); ignored for PTYs. */
  readonly stdin: boolean;
  /** SIGKILL the process this many ms after the request arrived (from Connect-Timeout-Ms). */
  readonly lifetimeMs?: number;
}

/** What plan() needs besides the request. */
export interface PlanContext {
  readonly user: User;
  readonly injectedEnv: Record<string, string>;
  readonly defaultWorkdir: string | undefined;
  /** Value of the Connect-Timeout-Ms request header, if any. */
  readonly timeoutHeader: string | null;
  /** envd's own PATH, handed to every process. */
  readonly path: string;
}

/** Describes a command line for error messages: `cmd arg1 arg2`. */
export function commandText(cmd: string, args: readonly string[]): string {
  return [cmd, ...args].join(" ");
}

/** Parses Connect-Timeout-Ms: absent or 0 → no limit; anything but a non-negative integer → invalid_argument. */
export function parseLifetime(header: string | null): number | undefined {
  if (header === null) return undefined;
  const text = header.trim();
  if (!/^\d{1,10}$/.test(text)) {
    throw new ConnectError(`invalid Connect-Timeout-Ms header value '${header}': not an integer`, Code.InvalidArgument);
  }
  const ms = Number(text);
  return ms > 0 ? ms : undefined;
}

/** Builds the environment from scratch (envd-behaviour §8.2): PATH, HOME, USER, LOGNAME, /init vars, request vars. */
export function buildEnv(user: User, path: string, injected: Record<string, string>, requested: Record<string, string>): Record<string, string> {
  return { PATH: path, HOME: user.home, USER: user.name, LOGNAME: user.name, ...injected, ...requested };
}

function checkEnv(env: Record<string, string>): void {
  for (const [k, v] of Object.entries(env)) {
    if (k === "" || k.includes("=") || k.includes("\0")) throw new ConnectError(`invalid environment variable name '${k.replace("\0", "\\0")}'`, Code.InvalidArgument);
    if (v.includes("\0")) throw new ConnectError(`environment variable '${k}' contains a NUL byte`, Code.InvalidArgument);
  }
}

/** Validates a Start request and resolves its user, cwd, env and lifetime; throws invalid_argument on bad input. */
export async function plan(req: StartRequest, ctx: PlanContext): Promise<SpawnPlan> {
  const config = req.process;
  if (!config || config.cmd === "") throw new ConnectError("process.cmd must not be empty", Code.InvalidArgument);
  if (config.cmd.includes("\0") || config.args.some((a) => a.includes("\0"))) {
    throw new ConnectError("process.cmd and process.args must not contain NUL bytes", Code.InvalidArgument);
  }
  // Never start with ids the kernel or setpriv would read as "keep ours": the process would be root.
  const badIds = unapplicableIds(ctx.user);
  if (badIds) throw new ConnectError(`cannot start a process as user '${ctx.user.name}': ${badIds}`, Code.PermissionDenied);
  const lifetimeMs = parseLifetime(ctx.timeoutHeader);
  const env = buildEnv(ctx.user, ctx.path, ctx.injectedEnv, config.envs);
  checkEnv(env);
  const cwd = expandAndResolve(config.cwd ?? "", ctx.user, ctx.defaultWorkdir);
  let isDir = false;
  try {
    // One local stat: synchronously, as the thread-pool round trip cost more than the call.
    isDir = statSync(cwd).isDirectory();
  } catch {
    throw new ConnectError(`cwd '${cwd}' does not exist`, Code.InvalidArgument);
  }
  if (!isDir) throw new ConnectError(`cwd '${cwd}' is not a directory`, Code.InvalidArgument);
  const size = req.pty?.size;
  return {
    cmd: config.cmd,
    args: [...config.args],
    env,
    cwd,
    user: ctx.user,
    pty: req.pty ? { cols: size?.cols || 80, rows: size?.rows || 24 } : undefined,
    stdin: req.stdin ?? true,
    lifetimeMs,
  };
}
