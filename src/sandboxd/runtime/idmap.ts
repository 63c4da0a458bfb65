/** Host uid and gid that sandbox root (uid 0 inside every sandbox's user namespace) maps to. */
export const MAPPED_ROOT = 100_000;

/** How many ids each sandbox's user namespace maps (0..65535 inside). */
export const MAPPED_RANGE = 65_536;
