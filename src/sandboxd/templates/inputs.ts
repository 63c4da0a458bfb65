/** What the template operations ask for, after the API parsed and checked the request bodies. */
import type { TemplateResources } from "./resources.js";
import type { BuildSpec } from "./steps.js";

/** v1 POST /templates: a template (named or not) built at once from a Dockerfile. */
export interface DockerfileTemplate {
  /** The template's name (checked and lower-cased), or none for an unnamed template. */
  alias?: string;
  resources: TemplateResources;
  /** The Dockerfile's steps and commands. */
  spec: BuildSpec;
}

/** POST /v3/templates: a named template and the tags its next build gets; the steps come later. */
export interface NamedTemplate {
  /** The template's name, checked and lower-cased. */
  name: string;
  /** Checked, lower-cased and deduplicated tags. */
  tags: string[];
  resources: TemplateResources;
}

/** PATCH /v2/templates/{id}: what changes (only visibility can). */
export interface TemplateUpdate {
  public?: boolean;
}

/** POST and DELETE /templates/tags: the template, the build its `tag` names, and the tags to add or remove. */
export interface TagChange {
  /** The template's name, checked and lower-cased. */
  name: string;
  /** The tag naming the build new tags point at (POST only; none means the default tag). */
  tag?: string;
  /** Checked, lower-cased and deduplicated tags. */
  tags: string[];
}
