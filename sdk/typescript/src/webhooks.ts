// Standard Webhooks signature verification for receivers of dripfeed-relay
// (hand-written: the generated types describe the APIs, this checks what a
// receiver gets). The relay sends webhook-id, webhook-timestamp and
// webhook-signature ("v1," + base64 HMAC-SHA256 over
// "{id}.{timestamp}.{body}" with the secret's key; several, space-separated,
// while a secret is rotated).
import { createHmac, timingSafeEqual } from "node:crypto";

/** Seconds a webhook-timestamp may be away from the receiver's clock. */
export const TOLERANCE = 5 * 60;

/** The delivery is not signed with the secret (or too old, or too new). */
export class InvalidSignature extends Error {}

function key(secret: string): Buffer {
  return Buffer.from(secret.replace(/^whsec_/, ""), "base64");
}

/** The webhook-signature value the relay sends for this delivery. */
export function sign(secret: string, id: string, timestamp: number, body: Uint8Array | string): string {
  const mac = createHmac("sha256", key(secret));
  mac.update(`${id}.${timestamp}.`);
  mac.update(body);
  return "v1," + mac.digest("base64");
}

/**
 * Checks a delivery's signature and returns its webhook-id; throws
 * InvalidSignature when a header is missing, the timestamp is more than
 * `tolerance` seconds from `now` (seconds; default the clock), or no
 * signature matches. `headers` is read with lower-case names.
 */
export function verify(
  secret: string,
  headers: Record<string, string | string[] | undefined>,
  body: Uint8Array | string,
  tolerance = TOLERANCE,
  now = Date.now() / 1000,
): string {
  const one = (name: string) => {
    const v = headers[name];
    return Array.isArray(v) ? v[0] ?? "" : v ?? "";
  };
  const id = one("webhook-id");
  const stamp = one("webhook-timestamp");
  const signatures = one("webhook-signature").split(" ").filter((s) => s.length > 0);
  if (!id || !/^[0-9]+$/.test(stamp) || signatures.length === 0) {
    throw new InvalidSignature("missing webhook-id, webhook-timestamp or webhook-signature");
  }
  if (Math.abs(now - Number(stamp)) > tolerance) {
    throw new InvalidSignature(`webhook-timestamp ${stamp} is more than ${tolerance} s away`);
  }
  const expected = Buffer.from(sign(secret, id, Number(stamp), body));
  const ok = signatures.some((s) => {
    const got = Buffer.from(s, "latin1");
    return got.length === expected.length && timingSafeEqual(got, expected);
  });
  if (!ok) {
    throw new InvalidSignature("no signature matches the secret");
  }
  return id;
}
