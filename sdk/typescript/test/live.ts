// The TypeScript SDK against a live relay (run by sdk/test.sh): through
// the typed openapi-fetch clients, makes a destination pointing at a
// receiver this test runs, posts a webhook and reads its status until
// delivered, checks the signature with verify(), changes the rate, lets a
// refusing receiver dead-letter a webhook, pages the dead letters and
// redrives it, and posts an event to an application's endpoint.
// Environment: INTAKE_URL, ADMIN_URL, INTAKE_KEY, ADMIN_TOKEN.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

import { adminClient, intakeClient, InvalidSignature, verify } from "../src/index.js";

const SECRET = "whsec_" + Buffer.from("sdk-test-secret-of-32-bytes-long").toString("base64");

type Got = { path: string; id: string; ok: boolean; kind: string | undefined };

async function eventually<T>(what: string, check: () => Promise<T | undefined | false>, seconds = 20): Promise<T> {
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    const value = await check();
    if (value) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`not within ${seconds} s: ${what}`);
}

async function main() {
  const env = (name: string) => {
    const v = process.env[name];
    if (!v) throw new Error(`${name} is not set`);
    return v;
  };
  const intake = intakeClient(env("INTAKE_URL"), env("INTAKE_KEY"));
  const admin = adminClient(env("ADMIN_URL"), env("ADMIN_TOKEN"));

  const got: Got[] = [];
  let refuse = false;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      let ok = true;
      try {
        verify(SECRET, req.headers, body);
      } catch (e) {
        if (!(e instanceof InvalidSignature)) throw e;
        ok = false;
      }
      const kind = req.headers["webhook-event-type"];
      got.push({ path: req.url ?? "", id: String(req.headers["webhook-id"]), ok, kind: kind as string | undefined });
      res.writeHead(refuse ? 400 : 204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const rx = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  // A destination (201), then its rate changed.
  const made = await admin.PUT("/v1/destinations/{name}", {
    params: { path: { name: "sdk-ts" } },
    body: { url: `${rx}/hooks`, rate: 50, secret: SECRET },
  });
  assert.equal(made.response.status, 201, JSON.stringify(made.error));
  const changed = await admin.PATCH("/v1/destinations/{name}", {
    params: { path: { name: "sdk-ts" } },
    body: { rate: 20 },
    headers: { "Content-Type": "application/merge-patch+json" },
  });
  assert.equal(changed.response.status, 200, JSON.stringify(changed.error));
  assert.equal(changed.data?.rate, 20);

  // A webhook: 202, delivered, signed.
  const sent = await intake.POST("/v1/webhooks/deliver", {
    params: { header: { "X-Destination": "sdk-ts" } },
    body: { order: 1 },
  });
  assert.equal(sent.response.status, 202, JSON.stringify(sent.error));
  const id = sent.data!.id;
  const status = await eventually("delivered", async () => {
    const s = await intake.GET("/v1/webhooks/{id}", { params: { path: { id } } });
    return s.data?.state === "delivered" && s.data;
  });
  assert.ok(status.attempts >= 1);
  assert.ok(got.some((g) => g.id === id && g.ok), JSON.stringify(got));

  // Refused for good: dead-lettered, paged, redriven once taken.
  refuse = true;
  const doomed = await intake.POST("/v1/webhooks/deliver", {
    params: { header: { "X-Destination": "sdk-ts" } },
    body: { order: 2 },
  });
  assert.equal(doomed.response.status, 202);
  const dead = doomed.data!.id;
  await eventually("dead-lettered", async () => {
    const page = await admin.GET("/v1/dead-letters", { params: { query: { destination: "sdk-ts", limit: 10 } } });
    return page.data?.dead_letters.some((d) => d.id === dead);
  });
  refuse = false;
  const again = await admin.POST("/v1/dead-letters/redrive", { body: { ids: [dead] } });
  assert.equal(again.response.status, 200, JSON.stringify(again.error));
  await eventually("redriven and delivered", async () => got.filter((g) => g.id === dead && g.ok).length >= 1);

  // An event to an application's endpoint subscribed to its type.
  const app = await admin.PUT("/v1/applications/{app}", { params: { path: { app: "shop-ts" } }, body: {} });
  assert.ok([200, 201].includes(app.response.status), JSON.stringify(app.error));
  const endpoint = await admin.PUT("/v1/applications/{app}/endpoints/{name}", {
    params: { path: { app: "shop-ts", name: "orders-ts" } },
    body: { url: `${rx}/events`, secret: SECRET, event_types: ["order.*"] },
  });
  assert.ok([200, 201].includes(endpoint.response.status), JSON.stringify(endpoint.error));
  const event = await intake.POST("/v1/applications/{app}/events", {
    params: { path: { app: "shop-ts" } },
    body: { type: "order.created", payload: { order: 3 } },
  });
  assert.equal(event.response.status, 202, JSON.stringify(event.error));
  assert.equal(event.data?.endpoints, 1);
  await eventually("the event delivered", async () =>
    got.some((g) => g.path === "/events" && g.ok && g.kind === "order.created"),
  );
  server.close();
  console.log(`typescript sdk: ${got.length} deliveries received, each step as expected`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
