/**
 * AWS ECR login: ECR's GetAuthorizationToken, signed with AWS Signature Version 4 from the
 * build's access key, answers a 12-hour registry password for user `AWS` (what `aws ecr
 * get-login-password` prints).
 */
import { createHash, createHmac } from "node:crypto";
import { request } from "node:https";

const hmac = (key: Buffer | string, data: string) => createHmac("sha256", key).update(data).digest();
const sha256 = (data: string) => createHash("sha256").update(data).digest("hex");

/** Signs a POST of `body` to ECR's JSON API in `region`; the request's headers. */
export function signEcrRequest(c: { accessKeyId: string; secretAccessKey: string; region: string }, body: string, now = new Date()): { host: string; headers: Record<string, string> } {
  const host = `api.ecr.${c.region}.amazonaws.com`;
  const amzDate = now.toISOString().replace(/[:-]|\.\d{3}/g, "");
  const day = amzDate.slice(0, 8);
  const headers: Record<string, string> = {
    "content-type": "application/x-amz-json-1.1",
    host,
    "x-amz-date": amzDate,
    "x-amz-target": "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken",
  };
  const names = Object.keys(headers).sort();
  const canonical = ["POST", "/", "", ...names.map((n) => `${n}:${headers[n]}`), "", names.join(";"), sha256(body)].join("\n");
  const scope = `${day}/${c.region}/ecr/aws4_request`;
  const toSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256(canonical)].join("\n");
  const key = hmac(hmac(hmac(hmac(`AWS4${c.secretAccessKey}`, day), c.region), "ecr"), "aws4_request");
  const signature = createHmac("sha256", key).update(toSign).digest("hex");
  headers.authorization = `AWS4-HMAC-SHA256 Credential=${c.accessKeyId}/${scope}, SignedHeaders=${names.join(";")}, Signature=${signature}`;
  return { host, headers };
}

/** Asks ECR for a registry password with the build's AWS credentials. */
export function ecrLogin(c: { accessKeyId: string; secretAccessKey: string; region: string }, signal: AbortSignal): Promise<{ username: string; password: string }> {
  if (!/^[a-z]{2}(-[a-z]+)+-\d$/.test(c.region)) return Promise.reject(new Error(`'${c.region.slice(0, 40)}' is not an AWS region`));
  const body = "{}";
  const { host, headers } = signEcrRequest(c, body);
  return new Promise((resolve, reject) => {
    const req = request({ host, path: "/", method: "POST", headers: { ...headers, "content-length": String(body.length) }, signal, timeout: 30_000 }, (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (d: string) => (text = (text + d).slice(0, 65_536)));
      res.on("end", () => {
        try {
          const json = JSON.parse(text) as { authorizationData?: { authorizationToken?: string }[]; message?: string; __type?: string };
          const token = json.authorizationData?.[0]?.authorizationToken;
          if (res.statusCode !== 200 || !token) throw new Error(`ECR refused the credentials (${res.statusCode}${json.__type ? ` ${json.__type.split("#").pop()}` : ""})`);
          const [username, ...pw] = Buffer.from(token, "base64").toString("utf8").split(":");
          resolve({ username, password: pw.join(":") });
        } catch (err) {
          reject(err instanceof SyntaxError ? new Error(`ECR answered ${res.statusCode} with a body that is not JSON`) : err);
        }
      });
    });
    req.on("timeout", () => req.destroy(new Error("ECR did not answer within 30 s")));
    req.on("error", (err) => reject(new Error(`logging in to ECR failed: ${err.message}`)));
    req.end(body);
  });
}
