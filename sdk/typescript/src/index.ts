// dripfeed-relay's clients for TypeScript: openapi-fetch clients typed by
// the generated intake.ts and admin.ts (openapi-typescript, from the
// relay's OpenAPI documents), and signature verification for receivers.
import createClient from "openapi-fetch";
import type { paths as AdminPaths } from "./admin.js";
import type { paths as IntakePaths } from "./intake.js";

export { InvalidSignature, sign, verify, TOLERANCE } from "./webhooks.js";
export type { paths as IntakePaths, components as IntakeComponents } from "./intake.js";
export type { paths as AdminPaths, components as AdminComponents } from "./admin.js";

/** A client of the intake listener, sending `key` as its bearer token. */
export function intakeClient(baseUrl: string, key: string) {
  return createClient<IntakePaths>({ baseUrl, headers: { Authorization: `Bearer ${key}` } });
}

/** A client of the admin listener, sending `token` as its bearer token. */
export function adminClient(baseUrl: string, token: string) {
  return createClient<AdminPaths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });
}
