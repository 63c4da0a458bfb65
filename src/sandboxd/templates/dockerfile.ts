/**
 * Dockerfiles (the v1 API's `dockerfile`, the CLI's `template build -f`) as build specs: any
 * FROM (an image, or an earlier stage), multi-stage builds with COPY --from (a stage by name or
 * number, or an image), ARG before FROM, and Docker's variable substitution.
 */
import { DockerfileParser, ModifiableInstruction, PropertyInstruction, type Flag, type Instruction } from "dockerfile-ast";
import { expandVars } from "./docker-vars.js";
import { MAX_STEPS, type BuildSpec, type Stage, type Step } from "./steps.js";

/** A Dockerfile sandboxd cannot build, with the line it failed on. */
export class DockerfileError extends Error {}

/** The ready check E2B gives a CMD/ENTRYPOINT start command (20 s wait). */
const CMD_READY = "sleep 20";
/** Stages one Dockerfile may have (images named by COPY --from count too). */
const MAX_STAGES = 10;

const fail = (ins: Instruction, why: string): never => {
  throw new DockerfileError(`Dockerfile line ${ins.getRange().start.line + 1}: ${ins.getKeyword()} ${why}`);
};

/** The instruction's arguments as written (quotes removed by the parser), variables expanded, at least `min` of them. */
function args(ins: Instruction, min: number, vars: Record<string, string>): string[] {
  const a = ins.getArguments().map((x) => expandVars(x.getValue(), vars));
  if (a.length < min) fail(ins, `needs at least ${min} argument${min > 1 ? "s" : ""}`);
  return a;
}

/** The instruction's --flags (none for instructions that take none). */
const flagsOf = (ins: Instruction): Flag[] => (ins instanceof ModifiableInstruction ? ins.getFlags() : []);

/** ENV/ARG in either form (`K=V ...` or `K V`) as name/value pairs, values expanded; an ARG without a value takes `defaults`'. */
function envPairs(ins: Instruction, vars: Record<string, string>, defaults: Record<string, string>): string[] {
  args(ins, 1, {});
  if (!(ins instanceof PropertyInstruction)) return fail(ins, "is malformed");
  const out: string[] = [];
  for (const p of ins.getProperties()) {
    const value = p.getValue();
    if (value === null && ins.getKeyword() !== "ARG") fail(ins, `${p.getName()} has no value`);
    out.push(p.getName(), value === null ? (defaults[p.getName()] ?? "") : expandVars(value, vars));
  }
  return out;
}

/** A command given as a JSON array (exec form) or a shell string (`/bin/sh -c`). */
function execForm(ins: Instruction): string[] {
  const text = (ins.getArgumentsContent() ?? "").trim();
  if (text === "") fail(ins, "needs a command");
  if (!text.startsWith("[")) return ["/bin/sh", "-c", text];
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return fail(ins, "has a malformed JSON array");
  }
  if (!Array.isArray(parsed) || parsed.some((p) => typeof p !== "string")) fail(ins, "JSON form must be an array of strings");
  return parsed as string[];
}

/** The shell line of an exec form (the shell form's text as written). */
const line = (argv: string[]) => (argv[0] === "/bin/sh" && argv[1] === "-c" && argv.length === 3 ? argv[2] : argv.join(" "));

type Parsed = Pick<BuildSpec, "fromImage" | "steps" | "startCmd" | "readyCmd" | "initialUser" | "initialWorkdir" | "stages" | "fromStage" | "dockerStart">;

/**
 * Translates a Dockerfile into build steps, as the SDK's own `fromDockerfile` does for one stage:
 * steps start as root in /, COPY/ADD become COPY with their --chown/--chmod, ENV/ARG become ENV,
 * CMD/ENTRYPOINT the start command, EXPOSE/VOLUME/LABEL are ignored. Earlier stages become
 * `stages`; unknown and malformed instructions are errors.
 */
export function parseDockerfile(text: string): Parsed {
  const instructions = DockerfileParser.parse(text).getInstructions();
  const firstFrom = instructions.findIndex((i) => i.getKeyword() === "FROM");
  if (firstFrom < 0) throw new DockerfileError("a Dockerfile must have a FROM instruction");
  const globals: Record<string, string> = {};
  for (const ins of instructions.slice(0, firstFrom)) {
    if (ins.getKeyword() !== "ARG") fail(ins, "cannot come before the first FROM (only ARG can)");
    const pairs = envPairs(ins, globals, {});
    for (let j = 0; j < pairs.length; j += 2) globals[pairs[j]] = pairs[j + 1];
  }
  const stages: Stage[] = [];
  const names = new Map<string, number>();
  /** The `stages` index of each Dockerfile stage so far, by its number (COPY --from=0). */
  const numbered: number[] = [];
  /** The variables each stage ends with, by its `stages` index. */
  const varsOf: Record<string, string>[] = [];
  /** The stage index a FROM or COPY --from names: an earlier stage by name or number, else an image made an implicit stage. */
  const stageOf = (ins: Instruction, ref: string, image: boolean): number | undefined => {
    const byName = names.get(ref.toLowerCase()) ?? (/^\d+$/.test(ref) ? numbered[Number(ref)] : undefined);
    if (byName !== undefined) return byName;
    if (/^\d+$/.test(ref)) fail(ins, `names stage ${ref}, which is not an earlier stage`);
    if (!image) return undefined;
    if (stages.length >= MAX_STAGES) fail(ins, `makes more than ${MAX_STAGES} stages`);
    stages.push({ fromImage: ref, steps: [] });
    return stages.length - 1;
  };
  const starts = instructions.flatMap((ins, i) => (ins.getKeyword() === "FROM" ? [i] : []));
  let final!: Parsed;
  let total = 0;
  starts.forEach((start, k) => {
    const from = instructions[start];
    for (const f of flagsOf(from)) if (f.getName() !== "platform") fail(from, `flag --${f.getName()} is not supported`);
    const fa = args(from, 1, globals);
    if (fa.length !== 1 && !(fa.length === 3 && fa[1].toLowerCase() === "as")) fail(from, "takes an image and an optional AS name");
    if (fa[0].toLowerCase() === "scratch") fail(from, "scratch is not supported: a sandbox needs /bin/sh, bash and glibc from its image");
    const base = stageOf(from, fa[0], false);
    const body = instructions.slice(start + 1, starts[k + 1] ?? instructions.length);
    const last = k === starts.length - 1;
    // a stage over an earlier one inherits its environment (ENV, and ARG, which become ENV here)
    const stage = parseStage(body, stageOf, last, { ...globals }, base === undefined ? {} : { ...varsOf[base] });
    varsOf[stages.length] = stage.vars;
    total += stage.steps.length;
    if (last) {
      final = { ...stage.out, steps: stage.steps, ...(base === undefined ? { fromImage: fa[0] } : { fromStage: base }), initialUser: "root", initialWorkdir: "/", ...(stages.length ? { stages } : {}) };
      return;
    }
    if (stages.length >= MAX_STAGES) fail(from, `makes more than ${MAX_STAGES} stages`);
    stages.push({ ...(fa[2] ? { name: fa[2].toLowerCase() } : {}), ...(base === undefined ? { fromImage: fa[0] } : { fromStage: base }), steps: stage.steps });
    if (fa[2]) names.set(fa[2].toLowerCase(), stages.length - 1);
    numbered.push(stages.length - 1);
  });
  if (total > MAX_STEPS) throw new DockerfileError(`at most ${MAX_STEPS} build steps, the Dockerfile makes ${total}`);
  return final;
}

/** One stage's instructions as steps (the last stage also gets its start command and E2B's closing USER/WORKDIR). */
function parseStage(body: Instruction[], stageOf: (ins: Instruction, ref: string, image: boolean) => number | undefined, last: boolean, globals: Record<string, string>, vars: Record<string, string>) {
  const steps: Step[] = [];
  const out: Pick<BuildSpec, "startCmd" | "readyCmd" | "dockerStart"> = {};
  let entrypoint: string[] | undefined;
  let cmd: string[] | undefined;
  let userSet = false;
  let workdirSet = false;
  for (const ins of body) {
    const kw = ins.getKeyword();
    switch (kw) {
      case "RUN":
        if (flagsOf(ins).length > 0) fail(ins, "flags are not supported");
        steps.push({ type: "RUN", args: [line(execForm(ins))] });
        break;
      case "COPY":
      case "ADD": {
        const flags = flagsOf(ins);
        const unknown = flags.find((f) => !["chown", "chmod", "from"].includes(f.getName()) || (f.getName() === "from" && kw === "ADD"));
        if (unknown) fail(ins, `flag --${unknown.getName()} is not supported`);
        const a = args(ins, 2, vars);
        const flag = (n: string) => expandVars(flags.find((f) => f.getName() === n)?.getValue() ?? "", vars);
        const mode = flag("chmod");
        if (mode && !/^[0-7]{3,4}$/.test(mode)) fail(ins, `--chmod must be octal, got ${JSON.stringify(mode)}`);
        const from = flag("from");
        const fromStage = from ? stageOf(ins, from, true) : undefined;
        for (const src of a.slice(0, -1)) steps.push({ type: "COPY", args: [src, a[a.length - 1], flag("chown"), mode], ...(fromStage !== undefined ? { fromStage } : { filesHash: "" }) });
        break;
      }
      case "WORKDIR":
        steps.push({ type: "WORKDIR", args: [args(ins, 1, vars)[0]] });
        workdirSet = true;
        break;
      case "USER":
        steps.push({ type: "USER", args: [args(ins, 1, vars)[0].split(":")[0]] });
        userSet = true;
        break;
      case "ENV":
      case "ARG": {
        const pairs = envPairs(ins, vars, globals);
        for (let j = 0; j < pairs.length; j += 2) vars[pairs[j]] = pairs[j + 1];
        steps.push({ type: "ENV", args: pairs });
        break;
      }
      case "CMD":
        cmd = execForm(ins);
        break;
      case "ENTRYPOINT":
        entrypoint = execForm(ins);
        cmd = undefined; // Docker resets CMD when ENTRYPOINT is set
        break;
      case "EXPOSE":
      case "VOLUME":
      case "LABEL":
      case "MAINTAINER":
        break;
      default:
        fail(ins, "is not a supported instruction (supported: FROM, RUN, COPY, ADD, WORKDIR, USER, ENV, ARG, CMD, ENTRYPOINT; EXPOSE, VOLUME, LABEL are ignored)");
    }
  }
  if (last) {
    if (entrypoint || cmd) {
      out.startCmd = line([...(entrypoint ?? []), ...(cmd ?? [])]);
      out.readyCmd = CMD_READY;
      out.dockerStart = { ...(entrypoint ? { entrypoint } : {}), ...(cmd ? { cmd } : {}) };
    }
    if (!userSet) steps.push({ type: "USER", args: ["user"] });
    if (!workdirSet) steps.push({ type: "WORKDIR", args: ["/home/user"] });
  }
  return { steps, out, vars };
}
