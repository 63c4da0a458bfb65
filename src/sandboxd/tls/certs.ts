import { createPrivateKey, X509Certificate } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
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
 * Makes (once) a local CA under `<dataDir>/tls` and a server certificate for `*.<domain>`,
 * `<domain>` and `api.<domain>` signed by it; re-issues only the server certificate when the
 * domain changed or it nears expiry, so clients keep trusting the same ca.crt. Keys are 0600.
 */
export async function ensureTls(dataDir: string, domain: string, log: Logger): Promise<TlsFiles> {
  const dir = join(dataDir, "tls");
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  const caFile = join(dir, "ca.crt");
  const caKey = join(dir, "ca.key");
  if (!existsSync(caFile) || !existsSync(caKey)) {
    await makeCa(dir);
    log.info({ caFile }, "made a local certificate authority");
  }
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

/** Writes the CA key and certificate in a scratch directory, then moves them in place (a crash leaves no half CA). */
async function makeCa(dir: string): Promise<void> {
  const tmp = join(dir, `.ca-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { mode: 0o700 });
  try {
    await openssl(
      [
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", "ca.key", "-out", "ca.crt", "-days", "3650", "-subj", "/CN=sandboxd local CA",
        "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
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
