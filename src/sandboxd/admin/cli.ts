import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { KEY_ID_LENGTH, hashKey, maskKey } from "../store/api-keys.js";
import { openStore, type Store } from "../store/store.js";
import type { Team } from "../store/teams.js";

/** What an admin command prints and how the process exits. */
export interface AdminResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

const TEAM_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;
const USAGE = `usage: sandboxd keys create --team T [--name N] | keys list [--team T] | keys revoke <key-id|api-id|key>
       sandboxd teams list | teams create T | teams set T  [--name N] [--max-concurrent N] [--max-length-hours H]
every command also takes --data-dir D (env SANDBOXD_DATA_DIR; default /var/lib/sandboxd), the
directory of a sandboxd store; a running sandboxd sees the change at once (revoked keys stop working
on the next request)`;

/** A user mistake: printed as `sandboxd: <message>` with exit code 2. */
class UsageError extends Error {}

/** A whole number flag within [min, max], or undefined when absent. */
function intFlag(v: string | undefined, name: string, min: number, max: number): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d{1,6}$/.test(v) || Number(v) < min || Number(v) > max) throw new UsageError(`--${name} must be a whole number from ${min} to ${max}, got '${v}'`);
  return Number(v);
}

/** A checked team ID. */
function teamId(v: string | undefined): string {
  if (v === undefined || v === "") throw new UsageError("a team ID is required");
  if (!TEAM_ID.test(v)) throw new UsageError(`a team ID is 1-63 of [a-z0-9-], starting with a letter or digit; got '${v.slice(0, 80)}'`);
  return v;
}

/** Columns padded to their widest cell. */
function table(rows: string[][]): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((c, i) => c.padEnd(widths[i])).join("  ").trimEnd()).join("\n") + "\n";
}

type Flags = { team?: string; name?: string; "max-concurrent"?: string; "max-length-hours"?: string };

/** The team's name and limits from the flags; only flags given are set. */
function teamChange(f: Flags): Partial<Omit<Team, "id">> {
  if (f.name !== undefined && (f.name.length === 0 || f.name.length > 100)) throw new UsageError("--name must be 1-100 characters");
  return {
    name: f.name,
    maxConcurrent: intFlag(f["max-concurrent"], "max-concurrent", 0, 100000),
    maxLengthHours: intFlag(f["max-length-hours"], "max-length-hours", 1, 8760),
  };
}

/** Runs one keys/teams command against an open store. */
function run(store: Store, cmd: string, positionals: string[], f: Flags): string {
  const ensureTeam = (id: string, change: Partial<Omit<Team, "id">>): boolean => {
    if (store.teams.get(id)) return false;
    store.teams.insert({ id, name: change.name ?? id, maxConcurrent: change.maxConcurrent ?? 100, maxLengthHours: change.maxLengthHours ?? 24 });
    return true;
  };
  switch (cmd) {
    case "keys create": {
      const team = teamId(f.team);
      const key = "e2b_" + randomBytes(20).toString("hex");
      const made = store.transaction(() => {
        const made = ensureTeam(team, teamChange(f));
        store.apiKeys.add(key, team);
        return made;
      });
      return `E2B_API_KEY=${key}\n# team ID: ${team}${made ? " (new team)" : ""}; key ID: ${hashKey(key).slice(0, KEY_ID_LENGTH)} (${maskKey(key)}); shown once, the store keeps only its hash\n`;
    }
    case "keys list": {
      const team = f.team === undefined ? undefined : teamId(f.team);
      const keys = store.apiKeys.list().filter((k) => team === undefined || k.teamID === team);
      return table([["KEY ID", "TEAM", "KEY", "CREATED"], ...keys.map((k) => [k.id, k.teamID, k.masked, k.createdAt])]);
    }
    case "keys revoke": {
      const ref = positionals[0];
      if (positionals.length !== 1 || !ref) throw new UsageError("keys revoke takes one key ID (from 'keys list'), the key's ID in the API (GET /api-keys) or the key itself");
      const n = store.apiKeys.revoke(ref);
      if (n === 0) throw new UsageError(`no key matches '${ref.startsWith("e2b_") ? maskKey(ref) : ref.slice(0, 40)}' (a key ID is the ${KEY_ID_LENGTH} characters 'keys list' shows)`);
      return `revoked ${n} key${n === 1 ? "" : "s"}\n`;
    }
    case "teams list":
      return table([["TEAM ID", "NAME", "MAX CONCURRENT", "MAX LENGTH HOURS"], ...store.teams.list().map((t) => [t.id, t.name, String(t.maxConcurrent), String(t.maxLengthHours)])]);
    case "teams create":
    case "teams set": {
      const id = teamId(positionals[0]);
      const change = teamChange(f);
      const made = store.transaction(() => {
        if (ensureTeam(id, change)) return true;
        if (cmd === "teams create") throw new UsageError(`team '${id}' already exists`);
        store.teams.update(id, change);
        return false;
      });
      const t = store.teams.get(id)!;
      return `${made ? "created" : "updated"} team ${t.id}: name ${JSON.stringify(t.name)}, max concurrent ${t.maxConcurrent}, max length ${t.maxLengthHours} h\n`;
    }
    default:
      throw new UsageError(`unknown command '${cmd}'\n${USAGE}`);
  }
}

/** `sandboxd keys …` and `sandboxd teams …`: manage teams and API keys in a data dir's store. */
export function runAdmin(argv: string[], env: NodeJS.ProcessEnv): AdminResult {
  let store: Store | undefined;
  try {
    const { values, positionals } = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: { "data-dir": { type: "string" }, team: { type: "string" }, name: { type: "string" }, "max-concurrent": { type: "string" }, "max-length-hours": { type: "string" }, help: { type: "boolean", short: "h" } },
    });
    if (values.help) return { stdout: USAGE + "\n", stderr: "", exitCode: 0 };
    const [group, verb, ...rest] = positionals;
    if (!verb) throw new UsageError(`'${group}' needs a command\n${USAGE}`);
    const dataDir = values["data-dir"] ?? env.SANDBOXD_DATA_DIR ?? "/var/lib/sandboxd";
    const file = join(dataDir, "sandboxd.db");
    if (!existsSync(file)) throw new UsageError(`no sandboxd store at ${file}: run 'sandboxd serve --data-dir ${dataDir}' once first, or pass --data-dir`);
    store = openStore(file);
    return { stdout: run(store, `${group} ${verb}`, rest, values), stderr: "", exitCode: 0 };
  } catch (err) {
    const usage = err instanceof UsageError || (err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS");
    return { stdout: "", stderr: `sandboxd: ${(err as Error).message}\n`, exitCode: usage ? 2 : 1 };
  } finally {
    store?.close();
  }
}
