import { createPrivateKey, X509Certificate } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Logger } from "../log.js";
import { openssl } from "./openssl.js";

/** The listener's TLS material and where the CA a client must trust lives. */
export interface TlsFiles {
  caFile: string;
  key: Buffer;
  cert: Buffer;
}

/** A server certificate is re-issued this long before it expires. */
const RENEW_BEFORE_MS = 30 * 24 * 3600 * 1000;

/**
 * The CA's name constraint: it may sign for the domain and its subdomains only, and for no IP
 * address (a permitted IP subtree of one unusable address each), so that a client trusting it
 * trusts nothing else even if its key leaks.
 */
export function nameConstraints(domain: string): string {
  return `critical,permitted;DNS:${domain},permitted;IP:0.0.0.0/255.255.255.255,permitted;IP:::/ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff`;
}

/**
 * Makes (once) a local CA under `<dataDir>/tls`, constrained to the domain, and a server
 * certificate for `*.<domain>`, `<domain>` and `api.<domain>` signed by it; re-issues the server
 * certificate when it nears expiry. A CA that is not constrained to exactly this domain (one made
 * before CAs carried the constraint, or for another domain) is replaced, its key deleted: an
 * unconstrained CA key on disk could sign for any name its trusters visit. Keys are 0600 in a
 * 0700 directory.
 */
export async function ensureTls(dataDir: string, domain: string, log: Logger): Promise<TlsFiles> {
  const dir = join(dataDir, "tls");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const caFile = join(dir, "ca.crt");
  const caKey = join(dir, "ca.key");
  if (!existsSync(caFile) || !existsSync(caKey)) {
    await makeCa(dir, domain);
    log.info({ caFile, domain }, "made a local certificate authority for the domain");
  } else if (!(await caConstrainedTo(caFile, domain))) {
    await makeCa(dir, domain);
    log.warn({ caFile, domain }, "replaced the local certificate authority with one constrained to the domain (the old one could sign for any name, or for another domain): clients must trust the new ca.crt");
  }
  chmodSync(caKey, 0o600);
  const certFile = join(dir, "server.crt");
  const keyFile = join(dir, "server.key");
  if (!serverCertFits(certFile, keyFile, caFile, domain)) {
    await makeServerCert(dir, domain);
    log.info({ domain, certFile }, "issued the server certificate");
  }
  return { caFile, key: readFileSync(keyFile), cert: Buffer.concat([readFileSync(certFile), readFileSync(caFile)]) };
}

/** Whether the existing server certificate covers the domain, is signed by our CA and is not about to expire. */
function serverCertFits(certFile: string, keyFile: string, caFile: string, domain: string): boolean {
  if (!existsSync(certFile) || !existsSync(keyFile)) return false;
  try {
    const cert = new X509Certificate(readFileSync(certFile));
    const ca = new X509Certificate(readFileSync(caFile));
    const names = ["x." + domain, domain, "api." + domain];
    return (
      cert.verify(ca.publicKey) &&
      cert.checkPrivateKey(createPrivateKey(readFileSync(keyFile))) &&
      names.every((n) => cert.checkHost(n, { wildcards: true }) !== undefined) &&
      Date.parse(cert.validTo) - Date.now() > RENEW_BEFORE_MS
    );
  } catch {
    return false;
  }
}

/**
 * Whether the CA carries a critical name constraint that permits exactly the domain's DNS subtree
 * and the two unusable IP subtrees, nothing else (read from openssl's text form, tolerant of how
 * it spells IPv6 addresses).
 */
async function caConstrainedTo(caFile: string, domain: string): Promise<boolean> {
  const text = await openssl(["x509", "-in", caFile, "-noout", "-ext", "nameConstraints"], dirname(caFile)).catch(() => "");
  const lines = text.split("\n").map((l) => l.trim()).filter(Boolean);
  const [header, permitted, ...names] = lines;
  const ips = names.filter((n) => /^IP:[0:.]+\/[0-9A-Fa-f:.]+$/.test(n));
  return header === "X509v3 Name Constraints: critical" && permitted === "Permitted:" && ips.length === 2 && names.length === 3 && names.includes(`DNS:${domain}`);
}

/** Writes the CA key and certificate in a scratch directory, then moves them in place (a crash leaves no half CA). */
async function makeCa(dir: string, domain: string): Promise<void> {
  const tmp = join(dir, `.ca-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { mode: 0o700 });
  try {
    await openssl(
      [
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", "ca.key", "-out", "ca.crt", "-days", "3650", "-subj", `/CN=sandboxd local CA for ${domain}`,
        "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-addext", `nameConstraints=${nameConstraints(domain)}`,
      ],
      tmp,
    );
    chmodSync(join(tmp, "ca.key"), 0o600);
    chmodSync(join(tmp, "ca.crt"), 0o644);
    renameSync(join(tmp, "ca.key"), join(dir, "ca.key"));
    renameSync(join(tmp, "ca.crt"), join(dir, "ca.crt"));
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** Issues the server key and certificate from our CA (825 days, the longest clients accept). */
async function makeServerCert(dir: string, domain: string): Promise<void> {
  const tmp = join(dir, `.server-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { mode: 0o700 });
  try {
    writeFileSync(
      join(tmp, "ext.cnf"),
      [
        `subjectAltName=DNS:*.${domain},DNS:${domain},DNS:api.${domain}`,
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature",
        "extendedKeyUsage=serverAuth",
        "",
      ].join("\n"),
    );
    await openssl(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", `/CN=${domain}`], tmp);
    await openssl(
      ["x509", "-req", "-in", "server.csr", "-CA", join(dir, "ca.crt"), "-CAkey", join(dir, "ca.key"), "-set_serial", "0x" + randomSerial(), "-days", "825", "-extfile", "ext.cnf", "-out", "server.crt"],
      tmp,
    );
    chmodSync(join(tmp, "server.key"), 0o600);
    chmodSync(join(tmp, "server.crt"), 0o644);
    renameSync(join(tmp, "server.key"), join(dir, "server.key"));
    renameSync(join(tmp, "server.crt"), join(dir, "server.crt"));
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** A positive 64-bit serial in hex (each issued certificate gets its own). */
function randomSerial(): string {
  const b = new Uint8Array(8);
  crypto.getRandomValues(b);
  b[0] &= 0x7f;
  b[0] |= 0x10;
  return Buffer.from(b).toString("hex");
}
