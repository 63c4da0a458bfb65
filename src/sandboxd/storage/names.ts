// Names of the pool's files: only IDs, never paths, so no caller can reach outside the pool.
import { StorageError } from "./errors.js";

const ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

/** Returns `id` when it is a plain ID (letters, digits, `_` and `-`, at most 128, no dot or slash); throws StorageError "invalid_name" otherwise. */
export function checkID(id: unknown, what: string): string {
  if (typeof id !== "string" || !ID.test(id)) {
    throw new StorageError("invalid_name", `${what} ${JSON.stringify(String(id)).slice(0, 80)} is not a valid ID (letters, digits, "_" and "-", at most 128)`);
  }
  return id;
}

/** The file name of an image of `id` (`<id>.img`). */
export function imageName(id: string): string {
  return `${id}.img`;
}

/** The ID an image file name holds, or undefined when the name is no image of a valid ID. */
export function idOfImage(name: string): string | undefined {
  if (!name.endsWith(".img")) return undefined;
  const id = name.slice(0, -4);
  return ID.test(id) ? id : undefined;
}
