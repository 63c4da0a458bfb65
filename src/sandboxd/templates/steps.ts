/** The definition of a template build: its base, its steps and the commands sandboxes start with. */

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

/** The step types a build runs. */
export const STEP_TYPES: readonly Step["type"][] = ["RUN", "COPY", "ENV", "WORKDIR", "USER"];

/** How many arguments each step type takes, at least and at most. */
export const STEP_ARITY: Readonly<Record<Step["type"], [number, number]>> = { RUN: [1, 2], COPY: [2, 4], ENV: [2, 1000], WORKDIR: [1, 1], USER: [1, 1] };

/** How many steps one build may have (each can be a layer of the template's overlay stack). */
export const MAX_STEPS = 40;
