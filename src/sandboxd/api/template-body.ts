/** The template request bodies (v1 and v3 creates, build steps, updates, tags) parsed into the template service's inputs. */
import { Forbidden, invalid } from "../errors.js";
import { DockerfileError, parseDockerfile } from "../templates/dockerfile.js";
import type { RegistryCredentials } from "../templates/oci/credentials.js";
import type { DockerfileTemplate, NamedTemplate, TagChange, TemplateUpdate } from "../templates/inputs.js";
import { checkTags, parseName } from "../templates/names.js";
import { resources, type TemplateResources } from "../templates/resources.js";
import { MAX_STEPS, STEP_ARITY, STEP_TYPES, type BuildSpec, type Step } from "../templates/steps.js";
import { objectBody, optBool, optInt, optString, optStringList } from "./validate.js";

/** The body's cpuCount, memoryMB and minFreeDiskMb, checked as E2B checks them. */
function resourcesOf(b: Record<string, unknown>): TemplateResources {
  return resources({ cpuCount: optInt(b, "cpuCount"), memoryMB: optInt(b, "memoryMB"), minFreeDiskMb: optInt(b, "minFreeDiskMb") });
}

/** The v1 POST /templates body: a Dockerfile (parsed here into steps), an optional name and resources. */
export function parseDockerfileTemplate(body: unknown, teamID: string): DockerfileTemplate {
  const b = objectBody(body, false);
  const dockerfile = optString(b, "dockerfile");
  if (!dockerfile) throw invalid(`field "dockerfile" is required`);
  const bodyTeam = optString(b, "teamID");
  if (bodyTeam && bodyTeam !== teamID) throw new Forbidden(`You don't have access to team '${bodyTeam}'`);
  const alias = optString(b, "alias") ? parseName(optString(b, "alias")!).name : undefined;
  const res = resourcesOf(b);
  let parsed: ReturnType<typeof parseDockerfile>;
  try {
    parsed = parseDockerfile(dockerfile);
  } catch (err) {
    if (err instanceof DockerfileError) throw invalid(`invalid Dockerfile: ${err.message}`);
    throw err;
  }
  const own = optString(b, "startCmd");
  // a startCmd of the request replaces the Dockerfile's own ENTRYPOINT and CMD
  const spec: BuildSpec = { ...parsed, startCmd: own || parsed.startCmd, readyCmd: optString(b, "readyCmd") || parsed.readyCmd, force: false, ...(own ? { dockerStart: undefined } : {}) };
  return { ...(alias !== undefined ? { alias } : {}), resources: res, spec };
}

/** The POST /v3/templates body: a name ("alias" in older SDKs, with an optional ":tag"), tags and resources. */
export function parseNamedTemplate(body: unknown): NamedTemplate {
  const b = objectBody(body, false);
  const raw = optString(b, "name") ?? optString(b, "alias");
  if (!raw) throw invalid("Name is required");
  const { name, tag } = parseName(raw);
  const tags = checkTags([...(tag ? [tag] : []), ...(optStringList(b, "tags", "tags") ?? [])]);
  return { name, tags, resources: resourcesOf(b) };
}

/** Checks one step's arity and argument types; throws an Invalid naming the step. */
function parseStep(raw: unknown, i: number): Step {
  const at = `steps[${i}]`;
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) throw invalid(`${at} must be an object`);
  const o = raw as Record<string, unknown>;
  const type = (typeof o.type === "string" ? o.type.toUpperCase() : "") as Step["type"];
  if (!STEP_TYPES.includes(type)) throw invalid(`${at}: unsupported step type ${JSON.stringify(o.type)} (supported: ${STEP_TYPES.join(", ")})`);
  const args = o.args ?? [];
  if (!Array.isArray(args) || args.some((a) => typeof a !== "string")) throw invalid(`${at}.args must be an array of strings`);
  const [min, max] = STEP_ARITY[type];
  if (args.length < min || args.length > max) throw invalid(`${at}: ${type} takes ${min === max ? min : `${min} to ${max}`} arguments, got ${args.length}`);
  if (type === "ENV" && args.length % 2 !== 0) throw invalid(`${at}: ENV takes name/value pairs`);
  if ((type === "WORKDIR" || type === "USER" || type === "RUN") && (args[0] as string).trim() === "") throw invalid(`${at}: ${type} needs a non-empty argument`);
  const filesHash = optString(o, "filesHash");
  if (type === "COPY" && !filesHash) throw invalid(`${at}: COPY needs the filesHash of its uploaded sources`);
  if (filesHash !== undefined && !/^[A-Za-z0-9_-]{1,128}$/.test(filesHash)) throw invalid(`${at}.filesHash must be 1-128 of [A-Za-z0-9_-]`);
  if (type === "COPY" && args[3] && !/^[0-7]{3,4}$/.test(args[3] as string)) throw invalid(`${at}: COPY mode must be octal, got ${JSON.stringify(args[3])}`);
  return { type, args: args as string[], ...(filesHash ? { filesHash } : {}), ...(optBool(o, "force") ? { force: true } : {}) };
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

/** The PATCH /v2/templates/{id} body (`TemplateUpdateRequest`): only `public`, a boolean. */
export function parseTemplateUpdate(body: unknown): TemplateUpdate {
  const b = objectBody(body, true);
  const unknown = Object.keys(b).filter((k) => k !== "public");
  if (unknown.length > 0) throw invalid(`unsupported field(s) ${unknown.map((k) => JSON.stringify(k)).join(", ")}: only "public" can be updated`);
  if (b.public !== undefined && typeof b.public !== "boolean") throw invalid(`field "public" must be a boolean, got ${JSON.stringify(b.public)?.slice(0, 40) ?? typeof b.public}`);
  return typeof b.public === "boolean" ? { public: b.public } : {};
}

/** The POST /templates/tags body: `target` ("name:tag") and at least one tag to point at its build. */
export function parseTagAssignment(body: unknown): TagChange {
  const b = objectBody(body, false);
  const { name, tag } = parseName(optString(b, "target") ?? "");
  const tags = checkTags(optStringList(b, "tags", "tags") ?? []);
  if (tags.length === 0) throw invalid("at least one tag is required");
  return { name, ...(tag !== undefined ? { tag } : {}), tags };
}

/** The DELETE /templates/tags body: the template's `name` and the tags to remove. */
export function parseTagRemoval(body: unknown): TagChange {
  const b = objectBody(body, false);
  const { name } = parseName(optString(b, "name") ?? "");
  return { name, tags: checkTags(optStringList(b, "tags", "tags") ?? []) };
}

const str = (o: Record<string, unknown>, k: string): string => {
  const v = o[k];
  if (typeof v !== "string" || v === "") throw invalid(`fromImageRegistry.${k} must be a non-empty string`);
  return v;
};

/** The `fromImageRegistry` of a build start body, checked (400 naming the field); undefined when absent. */
export function parseRegistryCredentials(body: unknown): RegistryCredentials | undefined {
  const raw = (body as Record<string, unknown> | null)?.fromImageRegistry;
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== "object" || Array.isArray(raw)) throw invalid("fromImageRegistry must be an object");
  const o = raw as Record<string, unknown>;
  if (o.type === "registry") return { type: "registry", username: str(o, "username"), password: str(o, "password") };
  if (o.type === "aws") return { type: "aws", accessKeyId: str(o, "awsAccessKeyId"), secretAccessKey: str(o, "awsSecretAccessKey"), region: str(o, "awsRegion") };
  if (o.type === "gcp") return { type: "gcp", serviceAccountJson: str(o, "serviceAccountJson") };
  throw invalid(`fromImageRegistry.type must be registry, aws or gcp, got ${JSON.stringify(o.type)?.slice(0, 40)}`);
}

