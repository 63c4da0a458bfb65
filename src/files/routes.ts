import type { Route } from "../http/routes.js";
import type { Deps } from "../deps.js";
import { HttpError } from "../http/errors.js";

/** GET/POST /files and POST /files/compose. */
export function filesRoutes(_deps: Deps): Route[] {
  const todo = () => {
    throw new HttpError(501, "not yet available in this build");
  };
  return [
    { method: "GET", path: "/files", exempt: true, handler: todo },
    { method: "POST", path: "/files", exempt: true, handler: todo },
    { method: "POST", path: "/files/compose", handler: todo },
  ];
}
