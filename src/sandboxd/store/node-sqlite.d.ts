/**
 * The part of Node 24's built-in `node:sqlite` the store uses: the project's @types/node is
 * Node 20's (envd runs on 20), which has no typings for it.
 */
declare module "node:sqlite" {
  type SQLValue = null | number | bigint | string | Uint8Array;
  /** A prepared statement. */
  export class StatementSync {
    run(...params: SQLValue[]): { changes: number | bigint; lastInsertRowid: number | bigint };
    get(...params: SQLValue[]): Record<string, SQLValue> | undefined;
    all(...params: SQLValue[]): Record<string, SQLValue>[];
  }
  /** One synchronous SQLite connection. */
  export class DatabaseSync {
    constructor(path: string, options?: { open?: boolean; readOnly?: boolean; timeout?: number });
    exec(sql: string): void;
    prepare(sql: string): StatementSync;
    close(): void;
  }
}
