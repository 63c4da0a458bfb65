/** OOM-killer scores: sandbox processes go first, sandboxd itself nearly last. */
import { writeFileSync } from "node:fs";
import type { Logger } from "../log.js";

/**
 * Every sandbox process's oom_score_adj: positive, so that a sandbox's processes go before
 * anything of the host's. It is also their floor (see withOomFloor): lowering it needs
 * CAP_SYS_RESOURCE on the host, which no sandbox has.
 */
export const SANDBOX_OOM_SCORE_ADJ = 500;

/** The shell command that gives the shell running it (and what it execs) the sandboxes' OOM floor, as withOomFloor does. */
export const SET_OOM_FLOOR = `echo ${SANDBOX_OOM_SCORE_ADJ} > /proc/self/oom_score_adj`;

/**
 * `argv` run behind a shell that first sets its own oom_score_adj to SANDBOX_OOM_SCORE_ADJ as host
 * root. A write by a holder of CAP_SYS_RESOURCE also sets the process's floor
 * (oom_score_adj_min), which every descendant inherits: without this, runc and so every sandbox
 * process would inherit sandboxd's own floor and could lower itself to it.
 */
export function withOomFloor(argv: string[]): string[] {
  return ["sh", "-c", `${SET_OOM_FLOOR} && exec "$@"`, "sh", ...argv];
}

/**
 * sandboxd's own oom_score_adj: near the floor, so that the OOM killer takes sandboxes (at
 * SANDBOX_OOM_SCORE_ADJ) and almost anything else before the service every tenant depends on.
 * Not -1000: a sandboxd that leaks must still be killable rather than hang the host.
 */
export const SANDBOXD_OOM_SCORE_ADJ = -900;

/**
 * Lowers sandboxd's own oom_score_adj (needs CAP_SYS_RESOURCE; a host that withholds it gets a
 * warning). Sandboxes do not inherit it: runc starts behind withOomFloor.
 */
export function protectFromOom(log: Logger): void {
  try {
    writeFileSync("/proc/self/oom_score_adj", String(SANDBOXD_OOM_SCORE_ADJ));
  } catch (err) {
    log.warn({ err: (err as Error).message }, "cannot lower sandboxd's own oom_score_adj: the OOM killer may pick it before a sandbox");
  }
}
