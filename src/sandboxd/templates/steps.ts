import { invalid, objectBody, optBool, optString } from "../api/validate.js";

/** One build step in the SDK's wire format (`TemplateStep`). */
export interface Step {
  type: "RUN" | "COPY" | "ENV" | "WORKDIR" | "USER";
  /** RUN [cmd, user?]; COPY [src, dest, user, mode]; ENV [k1, v1, ...]; WORKDIR [path]; USER [name]. */
  args: string[];
  /** COPY: the hash of the uploaded tar holding the sources. */
  filesHash?: string;
  /** Rebuild this step (and every later one) even when cached. */
  force?: boolean;
  /** COPY of a Dockerfile's `--from`: the files come from this earlier stage (an index into `stages`), not an upload. */
  fromStage?: number;
}

/** An earlier stage of a multi-stage Dockerfile: its base (an image, or an earlier stage) and its steps, run as root in /. */
export interface Stage {
  name?: string;
  fromImage?: string;
  fromStage?: number;
  steps: Step[];
}

/** What a build is made from: its base, steps, and the commands every sandbox starts with. */
export interface BuildSpec {
  fromImage?: string;
  fromTemplate?: string;
  steps: Step[];
  startCmd?: string;
  readyCmd?: string;
  /** Ignore the layer cache for every step. */
  force: boolean;
  /** The user and working directory steps start with (the SDK's builds start as `user` in /home/user). */
  initialUser: string;
  initialWorkdir: string;
  /** A multi-stage Dockerfile's earlier stages, built first, in order (COPY --from reads them). */
  stages?: Stage[];
  /** The last stage's FROM names an earlier stage (an index into `stages`). */
  fromStage?: number;
  /** A Dockerfile's own ENTRYPOINT and CMD (exec form): with the base image's, Docker's start command. */
  dockerStart?: { entrypoint?: string[]; cmd?: string[] };
}

const TYPES = new Set(["RUN", "COPY", "ENV", "WORKDIR", "USER"]);
/** How many steps one build may have (each can be a layer of the template's overlay stack). */
export const MAX_STEPS = 40;

/** Checks one step's arity and argument types; throws a 400 naming the step. */
function parseStep(raw: unknown, i: number): Step {
  const at = `steps[${i}]`;
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) throw invalid(`${at} must be an object`);
  const o = raw as Record<string, unknown>;
  const type = typeof o.type === "string" ? o.type.toUpperCase() : "";
  if (!TYPES.has(type)) throw invalid(`${at}: unsupported step type ${JSON.stringify(o.type)} (supported: ${[...TYPES].join(", ")})`);
  const args = o.args ?? [];
  if (!Array.isArray(args) || args.some((a) => typeof a !== "string")) throw invalid(`${at}.args must be an array of strings`);
  const need: Record<string, [number, number]> = { RUN: [1, 2], COPY: [2, 4], ENV: [2, 1000], WORKDIR: [1, 1], USER: [1, 1] };
  const [min, max] = need[type];
  if (args.length < min || args.length > max) throw invalid(`${at}: ${type} takes ${min === max ? min : `${min} to ${max}`} arguments, got ${args.length}`);
  if (type === "ENV" && args.length % 2 !== 0) throw invalid(`${at}: ENV takes name/value pairs`);
  if ((type === "WORKDIR" || type === "USER" || type === "RUN") && (args[0] as string).trim() === "") throw invalid(`${at}: ${type} needs a non-empty argument`);
  const filesHash = optString(o, "filesHash");
  if (type === "COPY" && !filesHash) throw invalid(`${at}: COPY needs the filesHash of its uploaded sources`);
  if (filesHash !== undefined && !/^[A-Za-z0-9_-]{1,128}$/.test(filesHash)) throw invalid(`${at}.filesHash must be 1-128 of [A-Za-z0-9_-]`);
  if (type === "COPY" && args[3] && !/^[0-7]{3,4}$/.test(args[3] as string)) throw invalid(`${at}: COPY mode must be octal, got ${JSON.stringify(args[3])}`);
  return { type: type as Step["type"], args: args as string[], ...(filesHash ? { filesHash } : {}), ...(optBool(o, "force") ? { force: true } : {}) };
}

/** The body of POST /v2/templates/{id}/builds/{buildID} (`TemplateBuildStartV2`) as a BuildSpec. */
export function parseBuildStart(body: unknown): BuildSpec {
  const o = objectBody(body, true);
  const fromImage = optString(o, "fromImage") || undefined;
  const fromTemplate = optString(o, "fromTemplate") || undefined;
  if (fromImage && fromTemplate) throw invalid("set only one of fromImage and fromTemplate");
  const rawSteps = o.steps ?? [];
  if (!Array.isArray(rawSteps)) throw invalid(`field "steps" must be an array`);
  if (rawSteps.length > MAX_STEPS) throw invalid(`at most ${MAX_STEPS} steps per build, got ${rawSteps.length}`);
  return {
    fromImage, fromTemplate, steps: rawSteps.map(parseStep), startCmd: optString(o, "startCmd") || undefined, readyCmd: optString(o, "readyCmd") || undefined,
    force: optBool(o, "force") ?? false, initialUser: "user", initialWorkdir: "/home/user",
  };
}
