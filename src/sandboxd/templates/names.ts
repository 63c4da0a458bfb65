import { invalid } from "../errors.js";

/** The longest template name (E2B's limit). */
export const MAX_NAME = 128;
const NAME = /^[a-z0-9][a-z0-9_-]*$/;
const TAG = /^[a-z0-9][a-z0-9_.-]{0,127}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The tag every build gets and a name without a tag means. */
export const DEFAULT_TAG = "default";

/** A checked tag: lower-cased, [a-z0-9_.-], not a UUID. */
export function checkTag(raw: string): string {
  const tag = raw.trim().toLowerCase();
  if (!TAG.test(tag)) throw invalid(`invalid tag '${raw}': a tag is 1-128 of [a-z0-9_.-] starting with a letter or digit`);
  if (UUID.test(tag)) throw invalid(`invalid tag '${raw}': a tag cannot be a UUID`);
  return tag;
}

/** Tags lower-cased and deduplicated, in order. */
export function checkTags(raw: string[]): string[] {
  return [...new Set(raw.map(checkTag))];
}

/**
 * A template name as "alias" or "alias:tag" (an optional "namespace/" before is dropped: names
 * here are per machine), lower-cased; throws an Invalid naming what is wrong.
 */
export function parseName(raw: string): { name: string; tag?: string } {
  if (raw.trim() === "") throw invalid("Name is required");
  if (raw.length > MAX_NAME) throw invalid(`name '${raw.slice(0, 40)}…' is longer than ${MAX_NAME} characters`);
  const lower = raw.trim().toLowerCase();
  const slash = lower.lastIndexOf("/");
  const [name, tag, extra] = lower.slice(slash + 1).split(":");
  if (extra !== undefined) throw invalid(`invalid name '${raw}': more than one ':'`);
  if (!NAME.test(name)) throw invalid(`invalid name '${raw}': a name is [a-z0-9_-] starting with a letter or digit`);
  return tag === undefined ? { name } : { name, tag: checkTag(tag) };
}
