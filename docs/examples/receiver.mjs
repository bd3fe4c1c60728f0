// A webhook receiver for dripfeed-relay: checks the Standard Webhooks
// signature, drops repeats by idempotency-key, answers 204.
// Run: WEBHOOK_SECRET=whsec_... node receiver.mjs PORT   (Node.js 18+, no packages)
import { createServer } from "node:http";
import { createHmac, timingSafeEqual } from "node:crypto";

const TOLERANCE = 5 * 60; // seconds a webhook-timestamp may be away from our clock

// The key is the base64 after "whsec_".
if (!process.env.WEBHOOK_SECRET) {
  console.error("receiver.mjs: set WEBHOOK_SECRET to the destination's secret (whsec_...)");
  process.exit(1);
}
const KEY = Buffer.from(process.env.WEBHOOK_SECRET.replace(/^whsec_/, ""), "base64");

const seen = new Set(); // keep these in your database, beside what the webhook changed

function verified(headers, body) {
  const id = headers["webhook-id"] ?? "";
  const stamp = headers["webhook-timestamp"] ?? "";
  if (!id || !/^\d+$/.test(stamp) || Math.abs(Date.now() / 1000 - Number(stamp)) > TOLERANCE) {
    return false;
  }
  // The signed content is "{webhook-id}.{webhook-timestamp}.{body}".
  const mac = createHmac("sha256", KEY).update(`${id}.${stamp}.`).update(body);
  const expected = Buffer.from(`v1,${mac.digest("base64")}`);
  // One signature per secret, space-separated ("v1,NEW v1,OLD" during a rotation);
  // timingSafeEqual takes the same time wherever the bytes differ.
  return (headers["webhook-signature"] ?? "").split(" ").some((sig) => {
    const given = Buffer.from(sig);
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

const server = createServer((req, res) => {
  if (req.method !== "POST") return res.writeHead(405).end();
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    const body = Buffer.concat(chunks); // the raw bytes: sign and parse these
    const key = req.headers["idempotency-key"] ?? ""; // equals webhook-id
    let status, line;
    if (!verified(req.headers, body)) {
      [status, line] = [401, `invalid ${req.headers["webhook-id"] ?? "-"}`];
    } else if (seen.has(key)) { // delivered before: do nothing, but say yes
      [status, line] = [204, `duplicate ${key}`];
    } else {
      seen.add(key); // your work goes here, before the 2xx
      // An event's copy names its type (absent on a plain webhook).
      const kind = req.headers["webhook-event-type"];
      [status, line] = [204, `valid ${key} ${kind ? kind + " " : ""}${body.toString()}`];
    }
    console.log(line.replace(/\n/g, " ")); // stdout to a pipe is synchronous on Linux
    res.writeHead(status).end();
  });
});

server.listen(Number(process.argv[2]), "127.0.0.1", () => {
  console.log(`listening on ${server.address().port}`);
});
