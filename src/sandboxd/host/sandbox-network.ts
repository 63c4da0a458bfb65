/**
 * The contract between a runtime and the sandbox network it is given, as CNI's is between
 * containerd and its plugins: the runtime makes a sandbox's namespaces and asks the network for
 * an address, to wire that address into the sandbox and to enforce its egress policy. The
 * network room implements it and the composition root hands it to the runtime. Types only: it
 * lies on the floor so that both rooms see it while neither imports the other.
 */

/** What the sandbox's firewall enforces: IPv4 networks to allow and deny, and the domains to allow. */
export interface EgressPolicy {
  allow: string[];
  deny: string[];
  domains: string[];
}

/** One sandbox's claim on the network; the runtime keeps it with its record and hands it back on later calls. */
export interface NetworkLease {
  /** The sandbox's IPv4 address, reachable from the host. */
  ip: string;
  /** The host end's address: the sandbox's gateway and nameserver. */
  hostIp: string;
  /** The host end's interface name. */
  hostVeth: string;
  /** The lease's place in the network's range. */
  slot: number;
}

/**
 * A slot wired before its sandbox was known: a user namespace (with the sandboxes' id mapping)
 * and a network namespace owned by it, with the sandbox's address, firewall and host rules in
 * place, held open by a waiting process until the container has joined them.
 */
export interface PreparedSlot {
  lease: NetworkLease;
  /** The user namespace the container joins (a path runc opens). */
  userns: string;
  /** The network namespace the container joins (a path runc opens). */
  netns: string;
  /** Whether the paths still lead to the namespaces that were wired (checked just before the container joins). */
  check(): boolean;
  /** Lets the holder go: the container holds the namespaces now (or, after a failed start, nothing does). */
  letGo(): void;
  /** The start is over (made or failed; the holder is let go if it was not): the network may wire the next slot ahead. */
  ended(): void;
}

/** The network a runtime is given: addresses, their wiring into a sandbox's namespace, and egress rules. */
export interface SandboxNetwork {
  /**
   * Claims the host network (refused when another instance's range overlaps); `sandboxIDs` are
   * the sandboxes the runtime still has, whose host rules stay. Runs once; later calls wait for it.
   */
  start(sandboxIDs: () => string[]): Promise<void>;
  /** Releases what the host keeps for the network when `sandboxesLeft` is 0. */
  close(sandboxesLeft: number): Promise<void>;
  /**
   * Takes a slot wired ahead for `sandboxID`, with `policy` in force, when one is ready (the
   * container then joins its namespaces and needs no attach); undefined otherwise.
   */
  takePrepared?(sandboxID: string, policy?: EgressPolicy): Promise<PreparedSlot | undefined>;
  /** Takes an address for a sandbox (kept across restarts); throws when none is free. */
  claim(sandboxID: string): NetworkLease;
  /**
   * Wires the lease into the network namespace of process `pid` with the policy's firewall in
   * place before any packet passes; `nice` runs the host-side tools niced (work ahead of need).
   */
  attach(lease: NetworkLease, pid: number, opts: { policy?: EgressPolicy; nice?: number }): Promise<void>;
  /** Replaces a wired sandbox's egress rules: new connections follow them, established ones live on. */
  setPolicy(lease: NetworkLease, pid: number, policy: EgressPolicy): Promise<void>;
  /** Unwires a sandbox (its host end and its host rules); nothing left to remove is fine. */
  detach(sandboxID: string): Promise<void>;
  /** Gives the sandbox's address back. */
  release(sandboxID: string): void;
  /** Every sandbox that holds an address now (what a sweep looks at). */
  claimed(): string[];
}
