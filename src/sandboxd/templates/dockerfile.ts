import { DockerfileParser, ModifiableInstruction, PropertyInstruction, type Flag, type Instruction } from "dockerfile-ast";
import { MAX_STEPS, type BuildSpec, type Step } from "./steps.js";

/** A Dockerfile sandboxd cannot build, with the line it failed on. */
export class DockerfileError extends Error {}

/** The ready check E2B gives a CMD/ENTRYPOINT start command (20 s wait). */
const CMD_READY = "sleep 20";

const fail = (ins: Instruction, why: string): never => {
  throw new DockerfileError(`Dockerfile line ${ins.getRange().start.line + 1}: ${ins.getKeyword()} ${why}`);
};

/** The instruction's arguments as written (quotes removed by the parser), at least `min` of them. */
function args(ins: Instruction, min: number): string[] {
  const a = ins.getArguments().map((x) => x.getValue());
  if (a.length < min) fail(ins, `needs at least ${min} argument${min > 1 ? "s" : ""}`);
  return a;
}

/** The instruction's --flags (none for instructions that take none). */
const flagsOf = (ins: Instruction): Flag[] => (ins instanceof ModifiableInstruction ? ins.getFlags() : []);

/** ENV/ARG in either form (`K=V ...` or `K V`, quotes and escapes resolved by the parser) as name/value pairs. */
function envPairs(ins: Instruction): string[] {
  args(ins, 1);
  if (!(ins instanceof PropertyInstruction)) return fail(ins, "is malformed");
  const out: string[] = [];
  for (const p of ins.getProperties()) {
    const value = p.getValue();
    if (value === null && ins.getKeyword() !== "ARG") fail(ins, `${p.getName()} has no value`);
    out.push(p.getName(), value ?? "");
  }
  return out;
}

/** A command given as a shell string or a JSON array. */
function command(ins: Instruction): string {
  const text = (ins.getArgumentsContent() ?? "").trim();
  if (text === "") fail(ins, "needs a command");
  if (text.startsWith("[")) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return fail(ins, "has a malformed JSON array");
    }
    if (!Array.isArray(parsed) || parsed.some((p) => typeof p !== "string")) fail(ins, "JSON form must be an array of strings");
    return (parsed as string[]).join(" ");
  }
  return text;
}

/**
 * Translates a Dockerfile (the v1 API's `dockerfile`) into build steps, as the SDK's own
 * `fromDockerfile` does: one FROM, steps start as root in /, COPY/ADD become COPY with their
 * --chown, ENV/ARG become ENV, CMD/ENTRYPOINT the start command, EXPOSE/VOLUME are ignored.
 * Multi-stage builds, COPY --from, unknown instructions and malformed ones are errors.
 */
export function parseDockerfile(text: string): Pick<BuildSpec, "fromImage" | "steps" | "startCmd" | "readyCmd" | "initialUser" | "initialWorkdir"> {
  const instructions = DockerfileParser.parse(text).getInstructions();
  const froms = instructions.filter((i) => i.getKeyword() === "FROM");
  if (froms.length > 1) throw new DockerfileError("multi-stage Dockerfiles are not supported (more than one FROM)");
  if (froms.length === 0 || instructions[0].getKeyword() !== "FROM") throw new DockerfileError("a Dockerfile must start with one FROM instruction");
  const fromArgs = args(froms[0], 1);
  if (fromArgs.length > 1) fail(froms[0], "with a stage name (AS) is not supported: multi-stage builds are not supported");
  const steps: Step[] = [];
  let startCmd: string | undefined;
  let readyCmd: string | undefined;
  let userSet = false;
  let workdirSet = false;
  for (const ins of instructions.slice(1)) {
    const kw = ins.getKeyword();
    switch (kw) {
      case "RUN":
        if (flagsOf(ins).length > 0) fail(ins, "flags are not supported");
        steps.push({ type: "RUN", args: [command(ins)] });
        break;
      case "COPY":
      case "ADD": {
        const flags = flagsOf(ins);
        if (flags.some((f) => f.getName() === "from")) fail(ins, "--from is not supported: multi-stage builds are not supported");
        const unknown = flags.find((f) => f.getName() !== "chown" && f.getName() !== "chmod");
        if (unknown) fail(ins, `flag --${unknown.getName()} is not supported`);
        const a = args(ins, 2);
        const user = flags.find((f) => f.getName() === "chown")?.getValue() ?? "";
        const mode = flags.find((f) => f.getName() === "chmod")?.getValue() ?? "";
        if (mode && !/^[0-7]{3,4}$/.test(mode)) fail(ins, `--chmod must be octal, got ${JSON.stringify(mode)}`);
        for (const src of a.slice(0, -1)) steps.push({ type: "COPY", args: [src, a[a.length - 1], user, mode], filesHash: "" });
        break;
      }
      case "WORKDIR":
        steps.push({ type: "WORKDIR", args: [args(ins, 1)[0]] });
        workdirSet = true;
        break;
      case "USER":
        steps.push({ type: "USER", args: [args(ins, 1)[0].split(":")[0]] });
        userSet = true;
        break;
      case "ENV":
      case "ARG":
        steps.push({ type: "ENV", args: envPairs(ins) });
        break;
      case "CMD":
      case "ENTRYPOINT":
        startCmd = command(ins);
        readyCmd = CMD_READY;
        break;
      case "EXPOSE":
      case "VOLUME":
      case "LABEL":
      case "MAINTAINER":
        break;
      case "FROM":
        break;
      default:
        fail(ins, "is not a supported instruction (supported: FROM, RUN, COPY, ADD, WORKDIR, USER, ENV, ARG, CMD, ENTRYPOINT; EXPOSE, VOLUME, LABEL are ignored)");
    }
  }
  if (!userSet) steps.push({ type: "USER", args: ["user"] });
  if (!workdirSet) steps.push({ type: "WORKDIR", args: ["/home/user"] });
  if (steps.length > MAX_STEPS) throw new DockerfileError(`at most ${MAX_STEPS} build steps, the Dockerfile makes ${steps.length}`);
  return { fromImage: fromArgs[0], steps, startCmd, readyCmd, initialUser: "root", initialWorkdir: "/" };
}
