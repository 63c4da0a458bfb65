import { isIP } from "node:net";
import { parseArgs } from "node:util";
import { parseUpstream } from "./network/dns-forwarder.js";
import { isLogLevel, LOG_LEVELS } from "../common/log.js";
import { checkInsecureRegistry, parseMirror, type RegistrySettings } from "./templates/oci/settings.js";

/** Everything `sandboxd serve` runs with; resolved once at start from flags, then environment, then defaults. */
export interface Config {
  /** Base domain: the API is `api.<domain>`, sandboxes are `<port>-<id>.<domain>`. */
  domain: string;
  /** Address to bind (`::` is dual-stack) and its port (0 picks a free one). */
  listenHost: string;
  listenPort: number;
  dataDir: string;
  logLevel: string;
  /** Directory of the envd release artifact; undefined: look beside the executable, then in the repository. */
  envdDir: string | undefined;
  /** Addresses handed to sandboxes, a /30 each. */
  networkCidr: string;
  /** Interface sandboxes' traffic is NATed out of ("auto": the default route's); undefined: no NAT, no forwarding. */
  egressInterface: string | undefined;
  /** Where the base rootfs is built once per machine. */
  cacheDir: string;
  /** How long team and sandbox metrics are kept, days. */
  metricsRetentionDays: number;
  /** Started sandboxes kept ready per warm template, claimed by creates (0: off). */
  warmPool: number;
  /** Network slots kept wired ahead for cold starts. */
  spareSlots: number;
  /** DNS server ("ADDR[:PORT]") sandboxd's resolver and egress proxy look names up with; undefined: the host's. */
  dnsUpstream: string | undefined;
  /** Memory all sandboxes together may reserve, MiB (paused ones included); undefined: derived from the machine at start. */
  memoryBudgetMB: number | undefined;
  /** Disk all sandboxes together may reserve (their disks' full sizes), MiB; undefined: derived from the data dir's free space at start. */
  diskBudgetMB: number | undefined;
  /** The most memory one sandbox (its template) may ask for, MiB. */
  maxSandboxMemoryMB: number;
  /** Memory and disk one team's sandboxes may reserve, MiB; undefined: only the host budget applies. */
  teamMemoryMB: number | undefined;
  teamDiskMB: number | undefined;
  /** How base images are pulled: Docker Hub mirrors, insecure registries, the host's credentials file. */
  registry: RegistrySettings;
  /** Where the storage pool of sandbox disks lives: the data dir's own file system (host), a loop-mounted XFS image (loop), or host when it reflinks (auto). */
  storageBacking: "auto" | "host" | "loop";
  /** Size of a loop-backed storage pool, MiB; undefined: half the data dir's free space at its first start. */
  storageSizeMB: number | undefined;
  /** Snapshots one team may keep at once. */
  teamMaxSnapshots: number;
  /** How often the reconcile loop compares the store with the runtime (sandboxes whose processes died are removed), ms. */
  reconcileIntervalMs: number;
}

/** What parseConfig returns: a config to run with, or text to print and an exit code. */
export type ParseResult = { config: Config } | { print: string; exitCode: number };

interface Option {
  env: string;
  help: string;
  def: string;
}

const options: Record<string, Option> = {
  domain: { env: "SANDBOXD_DOMAIN", help: "base domain (API at api.<domain>, sandboxes at <port>-<id>.<domain>)", def: "e2b.localhost" },
  listen: { env: "SANDBOXD_LISTEN", help: "address and port of the HTTPS listener (HTTP/1.1 and HTTP/2)", def: "[::]:443" },
  "data-dir": { env: "SANDBOXD_DATA_DIR", help: "state: database, TLS files, API key, sandboxes' layers", def: "/var/lib/sandboxd" },
  "log-level": { env: "SANDBOXD_LOG_LEVEL", help: "fatal|error|warn|info|debug|trace|silent", def: "info" },
  "envd-dir": { env: "SANDBOXD_ENVD_DIR", help: "envd release artifact directory (default: envd/ beside sandboxd)", def: "" },
  "network-cidr": { env: "SANDBOXD_NETWORK_CIDR", help: "IPv4 range for sandboxes, a /30 each", def: "10.12.0.0/16" },
  "egress-interface": { env: "SANDBOXD_EGRESS_INTERFACE", help: "the only interface sandbox traffic is forwarded and NATed out of; auto: the default route's; none: no way out", def: "auto" },
  "dns-upstream": { env: "SANDBOXD_DNS_UPSTREAM", help: "DNS server ADDR[:PORT] that sandboxes' resolver and the egress proxy ask (default: the host's resolver)", def: "" },
  "cache-dir": { env: "SANDBOXD_CACHE_DIR", help: "where the base rootfs is built once per machine", def: "/var/cache/sandboxd" },
  "spare-slots": { env: "SANDBOXD_SPARE_SLOTS", help: "network slots (namespaces, veth, addresses, firewall) kept wired ahead for cold starts, forks and resumes; 0: off", def: "0" },
  "warm-pool": { env: "SANDBOXD_WARM_POOL", help: "started sandboxes kept ready per warm template (the default one, and others for 10 min after use) for creates to claim; 0: off", def: "2" },
  "memory-budget-mb": { env: "SANDBOXD_MEMORY_BUDGET_MB", help: "MiB of memory all sandboxes' limits together may reserve, paused ones included (auto: limits are not reserved, and a create needs 256 MiB available above a floor of max(2 GiB, 10% of RAM))", def: "auto" },
  "disk-budget-mb": { env: "SANDBOXD_DISK_BUDGET_MB", help: "MiB of disk all sandboxes' disks together may reserve at full size (auto: disks are thin, and a create needs 1 GiB free above a floor of max(5 GiB, 5% of the filesystem) on the data dir's filesystem)", def: "auto" },
  "max-sandbox-memory-mb": { env: "SANDBOXD_MAX_SANDBOX_MEMORY_MB", help: "the most memory one sandbox's template may ask for, MiB (64..1048576)", def: "8192" },
  "team-memory-mb": { env: "SANDBOXD_TEAM_MEMORY_MB", help: "MiB of memory one team's sandboxes may reserve (0: only the host budget)", def: "0" },
  "team-disk-mb": { env: "SANDBOXD_TEAM_DISK_MB", help: "MiB of disk one team's sandboxes may reserve (0: only the host budget)", def: "0" },
  "registry-mirror": { env: "SANDBOXD_REGISTRY_MIRRORS", help: "Docker Hub mirror URL tried before the Hub for Hub images (repeatable; the variable is comma-separated); http:// mirrors are plain HTTP", def: "" },
  "insecure-registry": { env: "SANDBOXD_INSECURE_REGISTRIES", help: "registry host[:port] pulled from over plain HTTP or unverified TLS (repeatable; the variable is comma-separated)", def: "" },
  "registry-auth-file": { env: "SANDBOXD_REGISTRY_AUTH_FILE", help: "docker config.json with credentials for private registries, used by builds that bring none", def: "" },
  "registry-certs-dir": { env: "SANDBOXD_REGISTRY_CERTS_DIR", help: "Docker's certs.d layout: DIR/<host[:port]>/*.crt are CAs trusted for that registry beside the system's (client.cert/client.key: its client certificate)", def: "" },
  "registry-timeout": { env: "SANDBOXD_REGISTRY_TIMEOUT", help: "seconds a registry may take to answer a manifest request, or go without sending a byte of a pull, before the build fails", def: "60" },
  "image-cache-hours": { env: "SANDBOXD_IMAGE_CACHE_HOURS", help: "hours a pulled base image no build used stays cached (sooner when the disk is short)", def: "24" },
  "storage-backing": { env: "SANDBOXD_STORAGE_BACKING", help: "where sandbox disks and snapshots live: auto (the data dir's file system when it can reflink, else a loop-mounted XFS image under it), host or loop", def: "auto" },
  "storage-size-mb": { env: "SANDBOXD_STORAGE_SIZE_MB", help: "MiB of a loop-backed storage pool (a sparse image, grown when larger; auto: half the data dir's free space at its first start)", def: "auto" },
  "team-max-snapshots": { env: "SANDBOXD_TEAM_MAX_SNAPSHOTS", help: "snapshots one team may keep at once", def: "100" },
  "reconcile-interval-ms": { env: "SANDBOXD_RECONCILE_INTERVAL_MS", help: "how often the store is compared with the running sandboxes; a sandbox whose processes died is removed within it (100..60000)", def: "2000" },
  "metrics-retention-days": { env: "SANDBOXD_METRICS_RETENTION_DAYS", help: "days team and sandbox metrics are kept (1..366)", def: "7" },
};


/** Flags that may be given more than once (their variables are comma-separated). */
const REPEATABLE = new Set(["registry-mirror", "insecure-registry"]);

/** The registry flags as settings; throws a message fit to show the user. */
function registrySettings(get: (name: string) => string): RegistrySettings {
  const list = (name: string) => get(name).split(",").map((x) => x.trim()).filter(Boolean);
  const hours = get("image-cache-hours");
  if (!/^\d{1,5}$/.test(hours)) throw new Error(`--image-cache-hours must be a whole number of hours, got '${hours}'`);
  const timeout = get("registry-timeout");
  if (!/^\d{1,5}$/.test(timeout) || Number(timeout) < 1) throw new Error(`--registry-timeout must be a whole number of seconds (1..99999), got '${timeout}'`);
  return {
    mirrors: list("registry-mirror").map(parseMirror),
    insecure: new Set(list("insecure-registry").map(checkInsecureRegistry)),
    authFile: get("registry-auth-file") || undefined,
    imageGraceMs: Number(hours) * 3600_000,
    certsDir: get("registry-certs-dir") || undefined,
    timeoutMs: Number(timeout) * 1000,
  };
}

/** The `sandboxd --help` text. */
export function usage(version: string): string {
  const lines = [
    `sandboxd ${version}: a control plane for E2B-compatible sandboxes on one Linux machine`,
    "",
    "usage: sandboxd serve [flags]",
    "       sandboxd setup [--print] [--data-dir D] [--cache-dir D] [--domain D]   apt-get install what serve lacks (--print: only print the line)",
    "       sandboxd keys create --team T | keys list | keys revoke <id|key>   [--data-dir D]",
    "       sandboxd teams list | teams set T [--name N] [--max-concurrent N] [--max-length-hours H]   [--data-dir D]",
    "       sandboxd template build -f Dockerfile --name NAME [--cpu N] [--memory MIB] | template list",
    "       sandboxd --version | --help",
    "",
    "flags (each also an environment variable):",
  ];
  for (const [name, o] of Object.entries(options)) {
    lines.push(`  --${name.padEnd(22)} ${o.help}`, `  ${"".padEnd(24)} env ${o.env}; default ${o.def || "(see above)"}`);
  }
  return lines.join("\n") + "\n";
}

/** Splits `ADDR:PORT` or `[V6]:PORT`; throws a message fit to show the user. */
export function parseListen(text: string): { host: string; port: number } {
  const m = /^\[([^\]]+)\]:(\d{1,5})$/.exec(text) ?? /^([^:[\]]*):(\d{1,5})$/.exec(text);
  const host = m?.[1] === "" ? "::" : m?.[1];
  const port = m ? Number(m[2]) : NaN;
  if (!m || host === undefined || !(port >= 0 && port <= 65535)) {
    throw new Error(`--listen must be ADDR:PORT or [IPV6]:PORT (port 0..65535), got '${text}'`);
  }
  if (!isIP(host) && host !== "localhost") throw new Error(`--listen address must be an IP address, got '${host}'`);
  return { host, port };
}

/** Checks a DNS name of at least two labels; throws a message fit to show the user. */
export function checkDomain(text: string): string {
  const d = text.toLowerCase();
  const label = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
  const labels = d.split(".");
  if (d.length > 200 || labels.length < 2 || !labels.every((l) => label.test(l))) {
    // One label would put sandboxes under a wildcard like *.localhost, which TLS clients reject.
    throw new Error(`--domain must be a DNS name of at least two labels (e.g. e2b.localhost), got '${text}'`);
  }
  return d;
}

/** Checks an IPv4 CIDR with room for at least one /30; throws a message fit to show the user. */
export function checkCidr(text: string): string {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(text);
  if (!m || m.slice(1, 5).some((o) => Number(o) > 255) || Number(m[5]) > 30) {
    throw new Error(`--network-cidr must be an IPv4 CIDR of /30 or larger (e.g. 10.12.0.0/16), got '${text}'`);
  }
  return text;
}

/** Parses `sandboxd` arguments and environment into a Config, or into text to print (help, errors). */
export function parseConfig(argv: string[], env: NodeJS.ProcessEnv, version: string): ParseResult {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        ...Object.fromEntries(Object.keys(options).map((k) => [k, { type: "string" as const, multiple: REPEATABLE.has(k) }])),
        help: { type: "boolean", short: "h" },
        version: { type: "boolean" },
      },
    });
  } catch (err) {
    return { print: `sandboxd: ${(err as Error).message}\nrun 'sandboxd --help' for usage\n`, exitCode: 2 };
  }
  const { values, positionals } = parsed;
  if (values.help) return { print: usage(version), exitCode: 0 };
  if (values.version) return { print: `${version}\n`, exitCode: 0 };
  if (positionals.length !== 1 || positionals[0] !== "serve") {
    const what = positionals.length === 0 ? "no command given" : `unknown command '${positionals.join(" ")}'`;
    return { print: `sandboxd: ${what}; the command is 'serve'\nrun 'sandboxd --help' for usage\n`, exitCode: 2 };
  }
  const get = (name: string): string => {
    const v = (values as Record<string, string | string[] | boolean | undefined>)[name];
    if (typeof v === "string") return v;
    if (Array.isArray(v)) return v.join(",");
    return env[options[name].env] ?? options[name].def;
  };
  try {
    const listen = parseListen(get("listen"));
    const logLevel = get("log-level");
    if (!isLogLevel(logLevel)) throw new Error(`--log-level must be one of ${LOG_LEVELS.join("|")}, got '${logLevel}'`);
    const egress = get("egress-interface");
    if (egress !== "none" && !/^[A-Za-z0-9_.:-]{1,15}$/.test(egress)) throw new Error(`--egress-interface must be an interface name or none, got '${egress}'`);
    for (const dir of ["data-dir", "cache-dir"]) if (get(dir) === "") throw new Error(`--${dir} must not be empty`);
    const retention = get("metrics-retention-days");
    if (!/^\d{1,3}$/.test(retention) || Number(retention) < 1 || Number(retention) > 366) throw new Error(`--metrics-retention-days must be a whole number of days from 1 to 366, got '${retention}'`);
    const warmPool = get("warm-pool");
    if (!/^\d{1,2}$/.test(warmPool) || Number(warmPool) > 32) throw new Error(`--warm-pool must be a whole number from 0 to 32, got '${warmPool}'`);
    const spareSlots = get("spare-slots");
    if (!/^\d{1,2}$/.test(spareSlots) || Number(spareSlots) > 16) throw new Error(`--spare-slots must be a whole number from 0 to 16, got '${spareSlots}'`);
    /** A MiB figure: `auto` (where allowed) is undefined; 0 passes only where `min` is 0. */
    const mib = (name: string, min: number, auto: boolean): number | undefined => {
      const v = get(name);
      if (auto && v === "auto") return undefined;
      if (!/^\d{1,8}$/.test(v) || Number(v) < min) {
        throw new Error(`--${name} must be a whole number of MiB${min > 0 ? ` of at least ${min}` : ""}${auto ? " or auto" : ""}, got '${v}'`);
      }
      return Number(v);
    };
    const maxSandboxMemoryMB = mib("max-sandbox-memory-mb", 64, false)!;
    if (maxSandboxMemoryMB > 1 << 20) throw new Error(`--max-sandbox-memory-mb must be at most 1048576, got '${maxSandboxMemoryMB}'`);
    const storageBacking = get("storage-backing");
    if (storageBacking !== "auto" && storageBacking !== "host" && storageBacking !== "loop") throw new Error(`--storage-backing must be auto, host or loop, got '${storageBacking}'`);
    const teamMaxSnapshots = get("team-max-snapshots");
    if (!/^\d{1,6}$/.test(teamMaxSnapshots)) throw new Error(`--team-max-snapshots must be a whole number from 0 to 999999, got '${teamMaxSnapshots}'`);
    const reconcile = get("reconcile-interval-ms");
    if (!/^\d{3,5}$/.test(reconcile) || Number(reconcile) < 100 || Number(reconcile) > 60_000) throw new Error(`--reconcile-interval-ms must be a whole number of ms from 100 to 60000, got '${reconcile}'`);
    return {
      config: {
        reconcileIntervalMs: Number(reconcile),
        storageBacking,
        storageSizeMB: mib("storage-size-mb", 1024, true),
        teamMaxSnapshots: Number(teamMaxSnapshots),
        memoryBudgetMB: mib("memory-budget-mb", 64, true),
        diskBudgetMB: mib("disk-budget-mb", 64, true),
        maxSandboxMemoryMB,
        teamMemoryMB: mib("team-memory-mb", 0, false) || undefined,
        teamDiskMB: mib("team-disk-mb", 0, false) || undefined,
        domain: checkDomain(get("domain")),
        listenHost: listen.host,
        listenPort: listen.port,
        dataDir: get("data-dir"),
        logLevel,
        envdDir: get("envd-dir") || undefined,
        networkCidr: checkCidr(get("network-cidr")),
        egressInterface: egress === "none" ? undefined : egress,
        cacheDir: get("cache-dir"),
        metricsRetentionDays: Number(retention),
        warmPool: Number(warmPool),
        spareSlots: Number(spareSlots),
        registry: registrySettings(get),
        dnsUpstream: get("dns-upstream") ? parseUpstream(get("dns-upstream")) && get("dns-upstream") : undefined,
      },
    };
  } catch (err) {
    return { print: `sandboxd: ${(err as Error).message}\n`, exitCode: 2 };
  }
}

/** The E2B_DOMAIN value clients use: the domain, with the port only when it is not 443. */
export function clientDomain(domain: string, port: number): string {
  return port === 443 ? domain : `${domain}:${port}`;
}
