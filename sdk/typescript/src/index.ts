// @agentauth/client: agentauth's HTTP API for TypeScript — tokens and
// consent, tools, turns and their lifecycle, webhook verification — with
// one typed error per documented error code. Browser-safe: fetch and Web
// Crypto only; SigV4 loads the AWS packages on demand. It never logs, and
// never prints a secret: a token, the runtime token and the agent JWT are
// held in private fields, and what prints or serialises (AccessToken, the
// client, every error) holds none.

export {
  AgentauthClient,
  type CallOptions,
  type ClientOptions,
  type FollowTurnOptions,
  type GetAccessTokenOptions,
  type WaitForTurnOptions,
  type WaitOptions,
} from "./client.js";
export { type WithAccessTokenOptions, withAccessToken } from "./consent.js";
export * from "./errors.js";
export type { FetchLike } from "./http.js";
export type { AwsCredentialProvider, AwsCredentials } from "./sigv4.js";
export { AccessToken } from "./token.js";
export * from "./types.js";
export { VERSION } from "./version.js";
export {
  type VerifyWebhookOptions,
  verifyWebhook,
  WEBHOOK_SIGNATURE_HEADER,
  WEBHOOK_TIMESTAMP_HEADER,
  type WebhookCheck,
  type WebhookDelivery,
  WebhookVerificationError,
} from "./webhooks.js";
