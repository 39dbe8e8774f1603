// Verifying an origin delivery (docs/turns.md, "Verifying a delivery"):
// the HMAC-SHA256 signature over timestamp + "." + the raw body, a
// timestamp within the tolerance, then the signed body read as a
// delivery whose deliveryKey is what to deduplicate on. Web Crypto
// (crypto.subtle), so it runs in Node ≥ 20, browsers, Deno and workers.

import { AgentauthError } from "./errors.js";
import type { TurnEvent } from "./types.js";

/** The headers of a delivery. */
export const WEBHOOK_TIMESTAMP_HEADER = "X-Agentauth-Timestamp";
export const WEBHOOK_SIGNATURE_HEADER = "X-Agentauth-Signature";

/** Which check a delivery failed. */
export type WebhookCheck =
  /** X-Agentauth-Timestamp is not Unix seconds. */
  | "malformed_timestamp"
  /** X-Agentauth-Signature is not `v1=` and 64 lowercase hex digits. */
  | "malformed_signature"
  /** The timestamp is further from now than the tolerance: a replay, or a clock far off. */
  | "timestamp_out_of_window"
  /** The signature is not the body's under this secret: a changed body, or another secret. */
  | "signature_mismatch"
  /** The body verifies but is not a delivery (no turnId). */
  | "malformed_body";

/** A delivery that failed verification: refuse it (answer 4xx), never act on it. */
export class WebhookVerificationError extends AgentauthError {
  readonly check: WebhookCheck;
  constructor(check: WebhookCheck, message: string) {
    super({ code: check, message });
    this.check = check;
  }
}

/** A verified delivery: the body agentauth signed. */
export interface WebhookDelivery {
  connector: string;
  swarm: string;
  instanceKey: string;
  agent: string;
  turnId: string;
  traceId?: string;
  /** The turn event: `turn.parked`'s data.authorizationUrl, `turn.completed`'s data.final, … */
  event: Omit<TurnEvent, "turnId">;
  origin?: Record<string, unknown>;
  /** `<turnId>:<seq>`, from the signed body: deduplicate on it (never on X-Agentauth-Delivery). */
  deliveryKey: string;
}

export interface VerifyWebhookOptions {
  /** Seconds the timestamp may be from now (default 300). */
  toleranceSeconds?: number;
  /** Now, for tests. */
  now?: Date;
}

const encoder = new TextEncoder();

function bytesOf(v: string | Uint8Array | ArrayBuffer): Uint8Array {
  if (typeof v === "string") return encoder.encode(v);
  return v instanceof Uint8Array ? v : new Uint8Array(v);
}

/**
 * Verifies a delivery and returns its parsed body; throws
 * WebhookVerificationError naming the check that failed. rawBody is the
 * request body exactly as received (a Buffer is a Uint8Array), before any
 * JSON parsing; secret the Connector's secret.
 */
export async function verifyWebhook(
  secret: string | Uint8Array,
  timestamp: string | null | undefined,
  signature: string | null | undefined,
  rawBody: string | Uint8Array | ArrayBuffer,
  opts: VerifyWebhookOptions = {},
): Promise<WebhookDelivery> {
  const ts = timestamp ?? "";
  if (!/^[0-9]{1,12}$/.test(ts)) {
    throw new WebhookVerificationError(
      "malformed_timestamp",
      `${WEBHOOK_TIMESTAMP_HEADER} is not Unix seconds`,
    );
  }
  const sig = signature ?? "";
  if (!/^v1=[0-9a-f]{64}$/.test(sig)) {
    throw new WebhookVerificationError(
      "malformed_signature",
      `${WEBHOOK_SIGNATURE_HEADER} is not "v1=" and 64 lowercase hex digits`,
    );
  }
  const tolerance = opts.toleranceSeconds ?? 300;
  const now = (opts.now ?? new Date()).getTime() / 1000;
  const age = now - Number(ts);
  if (Math.abs(age) > tolerance) {
    throw new WebhookVerificationError(
      "timestamp_out_of_window",
      `signed ${Math.round(Math.abs(age))} s ${age >= 0 ? "ago" : "ahead"}, over the tolerance of ${tolerance} s`,
    );
  }
  const body = bytesOf(rawBody);
  const key = await crypto.subtle.importKey(
    "raw",
    bytesOf(secret) as BufferSource,
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const prefix = encoder.encode(`${ts}.`);
  const signed = new Uint8Array(prefix.length + body.length);
  signed.set(prefix);
  signed.set(body, prefix.length);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, signed as BufferSource));
  if (!constantTimeEqual(mac, hexBytes(sig.slice(3)))) {
    throw new WebhookVerificationError(
      "signature_mismatch",
      "the signature does not match the body under this secret",
    );
  }
  let d: Omit<WebhookDelivery, "deliveryKey">;
  try {
    d = JSON.parse(new TextDecoder().decode(body)) as Omit<WebhookDelivery, "deliveryKey">;
  } catch {
    throw new WebhookVerificationError("malformed_body", "the signed body is not JSON");
  }
  if (!d || typeof d.turnId !== "string" || d.turnId === "" || typeof d.event?.seq !== "number") {
    throw new WebhookVerificationError(
      "malformed_body",
      "the signed body is not a delivery (no turnId or event.seq)",
    );
  }
  return { ...d, deliveryKey: `${d.turnId}:${d.event.seq}` };
}

function hexBytes(hex: string): Uint8Array {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) {
    out[i] = Number.parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  }
  return out;
}

/** Compares in time that depends on the length only, never on where the bytes differ. */
function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) {
    diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
  }
  return diff === 0;
}
