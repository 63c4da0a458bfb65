// The storage pool's errors: one class with a code the API layer maps to an HTTP status.

/** Why a pool operation was refused: a bad name or size, a name taken or missing, a file in use, no room, or no reflink support. */
export type StorageErrorCode = "invalid_name" | "invalid_size" | "exists" | "not_found" | "busy" | "no_space" | "unsupported";

/** An error of the storage pool with a machine-readable `code` and a message fit for a user. */
export class StorageError extends Error {
  override readonly name = "StorageError";
  constructor(
    readonly code: StorageErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** Turns a file-system error of an operation on `what` into a StorageError when it has a pool meaning; otherwise returns it unchanged. */
export function storageErrorOf(err: unknown, what: string): unknown {
  const code = (err as NodeJS.ErrnoException)?.code;
  if (code === "ENOENT") return new StorageError("not_found", `${what} does not exist`);
  if (code === "EEXIST") return new StorageError("exists", `${what} already exists`);
  if (code === "ENOSPC" || code === "EDQUOT") return new StorageError("no_space", `no space left in the storage pool for ${what}`);
  if (code === "ENOTSUP" || code === "EOPNOTSUPP" || code === "EXDEV" || code === "EINVAL") {
    return new StorageError("unsupported", `the storage pool's file system cannot reflink ${what} (${code})`);
  }
  return err;
}
