// node:crypto for the whole daemon, loaded on first use.
import type nodeCrypto from "node:crypto";
import { lazy } from "./lazy.js";

/**
 * node:crypto, loaded when a request first needs a hash or random bytes rather than at start
 * (it is not in Node's start-up snapshot: loading it is a measurable share of envd's start).
 */
export const crypto = lazy<typeof nodeCrypto>("node:crypto", () => require("node:crypto"));
