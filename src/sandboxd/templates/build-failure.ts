/** A build that failed in a step, with the message the API's `reason` shows. */
export class BuildFailure extends Error {
  constructor(message: string, readonly step?: string) {
    super(message);
  }
}

