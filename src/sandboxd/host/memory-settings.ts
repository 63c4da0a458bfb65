/**
 * The Node and glibc settings `sandboxd serve` runs with, so that its memory comes back to its
 * level after a burst of work: a small V8 young generation (the scavenger's semi-spaces otherwise
 * grow to 16 MiB each under churn and stay reserved), `gc` exposed for the memory-reducing
 * collection when sandboxd goes quiet (memory-quiet.ts), and two glibc malloc arenas instead of
 * up to eight per core (each thread's arena keeps its freed pages). The launchers pass them
 * (scripts/launcher.sh, scripts/package-sandboxd.mjs); a start without them (`node sandboxd.cjs`,
 * `node dist/sandboxd`) re-executes itself with them before anything is opened.
 */

/** The V8 flags sandboxd runs with; a flag of the same name given otherwise (command line, NODE_OPTIONS) is kept as given. */
export const SANDBOXD_NODE_FLAGS: readonly string[] = ["--max-semi-space-size=2", "--expose-gc"];

/** The environment sandboxd runs with (read by glibc at start); a value set otherwise is kept. */
export const SANDBOXD_MEMORY_ENV: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: "2" };

/** The flag's name: `--max-semi-space-size=2` → `--max-semi-space-size` (underscores as dashes). */
function flagName(flag: string): string {
  return flag.split("=")[0].replace(/_/g, "-");
}

/** The settings this process lacks: flags neither among `execArgv` nor in NODE_OPTIONS, variables not in `env`. */
export function missingMemorySettings(execArgv: readonly string[], env: NodeJS.ProcessEnv): { flags: string[]; env: Record<string, string> } {
  const given = new Set([...execArgv, ...(env.NODE_OPTIONS ?? "").split(/\s+/).filter(Boolean)].map(flagName));
  const flags = SANDBOXD_NODE_FLAGS.filter((f) => !given.has(flagName(f)));
  const missingEnv = Object.fromEntries(Object.entries(SANDBOXD_MEMORY_ENV).filter(([k]) => env[k] === undefined));
  return { flags, env: missingEnv };
}

/**
 * Replaces this process (same pid, same stdio) with one that has the missing settings, when
 * some are missing and Node can re-execute (process.execve); returns otherwise. Call first
 * thing: nothing opened before survives.
 */
export function relaunchWithMemorySettings(): void {
  const missing = missingMemorySettings(process.execArgv, process.env);
  if (missing.flags.length === 0 && Object.keys(missing.env).length === 0) return;
  const execve = (process as { execve?: (file: string, args: string[], env: NodeJS.ProcessEnv) => never }).execve;
  if (typeof execve !== "function" || !process.argv[1]) return;
  execve.call(process, process.execPath, [process.execPath, ...process.execArgv, ...missing.flags, ...process.argv.slice(1)], { ...process.env, ...missing.env });
}
