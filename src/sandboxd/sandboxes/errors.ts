/** An error with the HTTP status and message the API answers it with (`{code, message}`). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly errorCode?: string,
  ) {
    super(message);
  }
}

/** E2B's message for a sandbox that is unknown or another team's. */
export function notFound(id: string): ApiError {
  return new ApiError(404, `Sandbox "${id}" doesn't exist or you don't have access to it`);
}
