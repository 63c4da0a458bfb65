import { parseArgs } from "node:util";
import { readFileSync } from "node:fs";
import { isLogLevel, LOG_LEVELS } from "../common/log.js";

/** Whether text is a lower-case hex SHA-512. */
export function isTokenHash(text: string): boolean {
  return /^[0-9a-f]{128}$/.test(text);
}

/** The host's current token hash: the flag's value, else the hash file's content (re-read each call). */
export function hostTokenHash(config: Config): string | undefined {
  if (config.accessTokenHash) return config.accessTokenHash;
  if (!config.accessTokenHashFile) return undefined;
  try {
    const text = readFileSync(config.accessTokenHashFile, "utf8").trim().toLowerCase();
    return isTokenHash(text) ? text : undefined;
  } catch {
    return undefined;
  }
}

/** How /init steps the clock: the real clock, never, or a fake clock kept in a file (tests). */
export type ClockMode = { kind: "system" } | { kind: "off" } | { kind: "file"; path: string };

/** Everything the daemon is configured with at start. */
export interface Config {
  port: number;
  host: string;
  defaultUser: string;
  defaultWorkdir: string | undefined;
  logLevel: string;
  /** Lower-case hex SHA-512 of the token the host allows /init to set (stands in for MMDS). */
  accessTokenHash: string | undefined;
  /** A file holding that hash, re-read on every /init so the host can change it. */
  accessTokenHashFile: string | undefined;
  clock: ClockMode;
  caBundlePath: string;
  caCertPath: string;
  runDir: string;
  /** Hosts file /init rewrites for events.e2b.local (hyperloopIP). */
  hostsFile: string;
  /** Most live processes started through Start at once. */
  maxProcesses: number;
  /** Most watchers (streaming and polling) at once. */
  maxWatchers: number;
  /** A polling watcher nobody asked for events for this long (ms) is removed; 0: never. */
  watcherIdleTimeoutMs: number;
  /** Largest single Connect message accepted, in bytes. */
  maxMessageBytes: number;
}

/** What parseConfig returns: a config to run with, or text to print and an exit code. */
export type ParseResult = { config: Config } | { print: string; exitCode: number };

const options = {
  port: { type: "string", env: "ENVD_PORT", help: "TCP port to listen on (0 picks a free one)", def: "49983" },
  host: { type: "string", env: "ENVD_HOST", help: "address to bind (:: is dual-stack)", def: "::" },
  "default-user": { type: "string", env: "ENVD_DEFAULT_USER", help: "user for requests that name none", def: "root" },
  "default-workdir": { type: "string", env: "ENVD_DEFAULT_WORKDIR", help: "directory substituted for empty paths", def: "" },
  "log-level": { type: "string", env: "ENVD_LOG_LEVEL", help: LOG_LEVELS.join("|"), def: "info" },
  "access-token-hash": { type: "string", env: "ENVD_ACCESS_TOKEN_HASH", help: "hex SHA-512 of a token /init may set", def: "" },
  "access-token-hash-file": { type: "string", env: "ENVD_ACCESS_TOKEN_HASH_FILE", help: "file holding that hash", def: "" },
  clock: { type: "string", env: "ENVD_CLOCK", help: "clock /init steps: system|off|file:PATH", def: "system" },
  "ca-bundle": { type: "string", env: "ENVD_CA_BUNDLE", help: "system CA bundle /init appends to", def: "/etc/ssl/certs/ca-certificates.crt" },
  "ca-cert": { type: "string", env: "ENVD_CA_CERT", help: "where /init keeps its CA certificate", def: "/usr/local/share/ca-certificates/e2b-ca.crt" },
  "run-dir": { type: "string", env: "ENVD_RUN_DIR", help: "runtime directory for sandbox metadata files", def: "/run/e2b" },
  "hosts-file": { type: "string", env: "ENVD_HOSTS_FILE", help: "hosts file /init maps events.e2b.local in", def: "/etc/hosts" },
  "max-processes": { type: "string", env: "ENVD_MAX_PROCESSES", help: "most live processes at once", def: "4096" },
  "max-watchers": { type: "string", env: "ENVD_MAX_WATCHERS", help: "most filesystem watchers at once", def: "1024" },
  "watcher-idle-timeout": { type: "string", env: "ENVD_WATCHER_IDLE_TIMEOUT", help: "seconds a polling watcher may go unpolled before it is removed (0: never)", def: "600" },
  "max-message-bytes": { type: "string", env: "ENVD_MAX_MESSAGE_BYTES", help: "largest Connect message accepted", def: String(64 * 1024 * 1024) },
} as const;

type OptionName = keyof typeof options;

/** Usage text listing every flag with its environment variable and default. */
export function usage(): string {
  const lines = ["Usage: envd [options]", "", "Options (each also settable by its environment variable):"];
  for (const [name, o] of Object.entries(options)) {
    lines.push(`  --${name.padEnd(24)} ${o.help} [${o.env}] (default: ${o.def || "none"})`);
  }
  lines.push("  --version                  print the version and exit", "  --help                     print this help and exit");
  return lines.join("\n") + "\n";
}

/** Parses argv (flags win over environment variables, which win over defaults). */
export function parseConfig(argv: string[], env: NodeJS.ProcessEnv, version: string): ParseResult {
  const spec = Object.fromEntries(Object.keys(options).map((k) => [k, { type: "string" as const }]));
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({
      args: argv,
      options: { ...spec, version: { type: "boolean" }, help: { type: "boolean", short: "h" } },
      strict: true,
      allowPositionals: false,
    }).values as Record<string, string | boolean | undefined>;
  } catch (err) {
    return { print: `envd: ${(err as Error).message}\n\n${usage()}`, exitCode: 2 };
  }
  if (values.help) return { print: usage(), exitCode: 0 };
  if (values.version) return { print: version + "\n", exitCode: 0 };
  const get = (name: OptionName): string => {
    const v = values[name];
    if (typeof v === "string") return v;
    return env[options[name].env] ?? options[name].def;
  };
  try {
    return { config: build(get) };
  } catch (err) {
    return { print: `envd: ${(err as Error).message}\n`, exitCode: 2 };
  }
}

function int(name: string, text: string, min: number, max: number): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < min || n > max) throw new Error(`--${name} must be an integer from ${min} to ${max}, got '${text}'`);
  return n;
}

function build(get: (name: OptionName) => string): Config {
  const hash = get("access-token-hash").trim().toLowerCase();
  if (hash && !isTokenHash(hash)) throw new Error("access token hash must be 128 hex characters (SHA-512)");
  const logLevel = get("log-level");
  if (!isLogLevel(logLevel)) throw new Error(`--log-level must be one of ${LOG_LEVELS.join("|")}, got '${logLevel}'`);
  const clockText = get("clock");
  let clock: ClockMode;
  if (clockText === "system" || clockText === "off") clock = { kind: clockText };
  else if (clockText.startsWith("file:") && clockText.length > 5) clock = { kind: "file", path: clockText.slice(5) };
  else throw new Error(`--clock must be system, off or file:PATH, got '${clockText}'`);
  return {
    port: int("port", get("port"), 0, 65535),
    host: get("host"),
    defaultUser: get("default-user"),
    defaultWorkdir: get("default-workdir") || undefined,
    logLevel,
    accessTokenHash: hash || undefined,
    accessTokenHashFile: get("access-token-hash-file") || undefined,
    clock,
    caBundlePath: get("ca-bundle"),
    caCertPath: get("ca-cert"),
    runDir: get("run-dir"),
    hostsFile: get("hosts-file"),
    maxProcesses: int("max-processes", get("max-processes"), 1, 1 << 20),
    maxWatchers: int("max-watchers", get("max-watchers"), 1, 1 << 20),
    watcherIdleTimeoutMs: int("watcher-idle-timeout", get("watcher-idle-timeout"), 0, 7 * 24 * 3600) * 1000,
    maxMessageBytes: int("max-message-bytes", get("max-message-bytes"), 1024, 2 ** 31 - 1),
  };
}
