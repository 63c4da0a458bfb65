// Everything envd loads after it listens (see http/early.ts): the entry point of dist/envd-rest.cjs,
// and of the rest asset inside the single executable.
export { startApp } from "./app.js";
export { startMemoryTrimmer } from "./platform/memory.js";
export { prepareTokenChecks } from "./sandbox/init.js";
