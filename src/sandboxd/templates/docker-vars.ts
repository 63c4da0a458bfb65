/**
 * Dockerfile variable substitution as Docker does it in FROM, COPY, ADD, ENV, WORKDIR and USER:
 * `$NAME`, `${NAME}`, `${NAME:-default}` and `${NAME:+alternative}`; `\$` is a literal dollar;
 * an unknown name expands to nothing.
 */

const PATTERN = /\\\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::([-+])((?:[^}\\]|\\.)*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g;

/** Expands the variables of `text` from `vars`. */
export function expandVars(text: string, vars: Record<string, string>): string {
  return text.replace(PATTERN, (m, braced: string | undefined, op: string | undefined, word: string | undefined, bare: string | undefined) => {
    if (m === "\\$") return "$";
    const name = braced ?? bare!;
    const value = Object.hasOwn(vars, name) ? vars[name] : undefined;
    if (op === "-") return value ? value : expandVars(word ?? "", vars);
    if (op === "+") return value ? expandVars(word ?? "", vars) : "";
    return value ?? "";
  });
}

/** Quotes one word for /bin/sh. */
export const shellWord = (s: string): string => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

/**
 * The start command Docker would run: the Dockerfile's ENTRYPOINT and CMD (exec form; shell form
 * is `/bin/sh -c`), the base image's ENTRYPOINT under a CMD the Dockerfile sets alone; as one
 * shell line. Undefined when the Dockerfile sets neither (E2B runs no image command then).
 */
export function dockerStartCmd(own: { entrypoint?: string[]; cmd?: string[] }, image?: { entrypoint?: string[]; cmd?: string[] }): string | undefined {
  if (!own.entrypoint && !own.cmd) return undefined;
  const argv = own.entrypoint ? [...own.entrypoint, ...(own.cmd ?? [])] : [...(image?.entrypoint ?? []), ...(own.cmd ?? [])];
  return argv.length > 0 ? argv.map(shellWord).join(" ") : undefined;
}
