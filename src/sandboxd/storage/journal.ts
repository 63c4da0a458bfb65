// Settling a copied ext4 image: a reflink of a mounted disk holds a journal whose transactions
// are committed but not yet written to their home blocks (ext4 checkpoints lazily). Every disk
// made from that copy would replay them at its first mount, each writing (and so unsharing) the
// same metadata blocks. Replaying them once in the copy itself, with e2fsck, leaves a clean file
// system whose copies mount without writing anything but their own changes.
import { execTool } from "../host/exec.js";

/**
 * Replays the journal of the ext4 image `image` (not mounted anywhere) in place: `e2fsck -E
 * journal_only`, no other check or repair. A replay is idempotent, so a crash midway leaves an
 * image the next mount replays again. Rejects with e2fsck's message when it fails.
 */
export async function replayJournal(image: string, nice?: number): Promise<void> {
  const r = await execTool("e2fsck", ["-E", "journal_only", "-p", image], { nice });
  // 0: clean, 1: errors corrected (the replay itself); anything else is a failure
  if (r.code !== 0 && r.code !== 1) throw new Error(`e2fsck -E journal_only of ${image} failed (exit ${r.code ?? "by signal"}): ${(r.stderr.trim() || r.stdout.trim()).slice(-500)}`);
}
