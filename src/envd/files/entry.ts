import { basename } from "node:path";
import { readMetadata } from "../filesystem/xattr.js";

/** One element of an upload response. */
export interface WrittenFile {
  path: string;
  name: string;
  type: "file";
  metadata?: Record<string, string>;
}

/** The response entry for a written file; metadata is read back from disk and omitted when empty. */
export async function writtenFile(path: string): Promise<WrittenFile> {
  const metadata = await readMetadata(path);
  const entry: WrittenFile = { path, name: basename(path), type: "file" };
  if (Object.keys(metadata).length > 0) entry.metadata = metadata;
  return entry;
}
