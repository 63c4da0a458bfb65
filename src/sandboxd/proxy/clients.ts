/**
 * The client connections each sandbox's traffic came in on (HTTP/2 sessions, HTTP/1.1 sockets).
 * An SDK keeps one connection per sandbox host open for as long as the client lives, and the
 * listener keeps an idle one ten minutes; once a sandbox is gone, the connections that carried
 * nothing but its traffic are closed (HTTP/2 gracefully, with GOAWAY) instead of idling.
 */
import type { Http2ServerRequest, Http2Session } from "node:http2";
import type { Socket } from "node:net";
import type { AnyRequest } from "../server/request.js";

type Conn = Http2Session | Socket;

/** Which client connections carried which sandboxes' traffic. */
export class ClientConnections {
  private readonly bySandbox = new Map<string, Set<Conn>>();
  private readonly sandboxesOf = new Map<Conn, Set<string>>();

  /** Records that `req`'s connection carries traffic for `sandboxID`. */
  note(req: AnyRequest, sandboxID: string): void {
    const conn: Conn | undefined = req.httpVersionMajor === 2 ? (req as Http2ServerRequest).stream?.session : req.socket;
    if (!conn || conn.destroyed) return;
    let ids = this.sandboxesOf.get(conn);
    if (ids?.has(sandboxID)) return;
    if (!ids) {
      this.sandboxesOf.set(conn, (ids = new Set()));
      conn.once("close", () => this.drop(conn));
    }
    ids.add(sandboxID);
    let conns = this.bySandbox.get(sandboxID);
    if (!conns) this.bySandbox.set(sandboxID, (conns = new Set()));
    conns.add(conn);
  }

  /** Closes the connections that carried only sandboxes `routed` says are gone. */
  sweep(routed: (sandboxID: string) => boolean): void {
    for (const [id, conns] of this.bySandbox) {
      if (routed(id)) continue;
      this.bySandbox.delete(id);
      for (const conn of conns) {
        const ids = this.sandboxesOf.get(conn);
        ids?.delete(id);
        if (ids && ids.size > 0) continue;
        this.sandboxesOf.delete(conn);
        if ("goaway" in conn) conn.close();
        else conn.end();
      }
    }
  }

  /** Sandboxes and connections tracked now. */
  size(): { sandboxes: number; connections: number } {
    return { sandboxes: this.bySandbox.size, connections: this.sandboxesOf.size };
  }

  private drop(conn: Conn): void {
    for (const id of this.sandboxesOf.get(conn) ?? []) {
      const conns = this.bySandbox.get(id);
      conns?.delete(conn);
      if (conns?.size === 0) this.bySandbox.delete(id);
    }
    this.sandboxesOf.delete(conn);
  }
}
