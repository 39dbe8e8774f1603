// withAccessToken: a function that needs a provider token, wrapped so
// that the token is injected and a missing consent is handled — in the
// spirit of AgentCore's @requires_access_token. The consent URL goes to
// a callback (show it to the user); the wrapper waits for the consent to
// land and then runs the function.

import {
  type AgentauthClient,
  checkOptionKeys,
  type GetAccessTokenOptions,
  getAccessTokenOptionKeys,
} from "./client.js";
import { AuthorizationRequired } from "./errors.js";
import type { AccessToken } from "./token.js";

export interface WithAccessTokenOptions extends GetAccessTokenOptions {
  /**
   * Called with the consent URL when the user must consent: show it to
   * them (a chat message, a browser tab). The wrapper then waits for the
   * consent; the callback may return before it lands.
   */
  onAuthorizationUrl: (url: string, required: AuthorizationRequired) => void | Promise<void>;
  /** How long to wait for each consent, in ms (default 10 minutes: waitForAuthorization's). */
  waitTimeoutMs?: number;
  /** Consents to go through before giving up (default 2: a consent, and one more if the grant went away at once). */
  maxConsents?: number;
}

/**
 * Wraps fn so that each call first gets a token for opts.app and passes
 * it as fn's first argument. When the user must consent, the wrapper
 * calls opts.onAuthorizationUrl with the URL, waits for the consent
 * (waitForAuthorization) and asks for the token again. Errors other than
 * a needed consent (and a consent that failed or expired:
 * AuthorizationFailed) are thrown to the caller.
 *
 * ```ts
 * const listRepos = withAccessToken(client, { app: "github", subjects: { user: "u:alice" },
 *   onAuthorizationUrl: (url) => console.log(`Connect GitHub: ${url}`) },
 *   async (token, org: string) => fetch(`https://api.github.com/orgs/${org}/repos`,
 *     { headers: { Authorization: token.authorizationHeader() } }).then((r) => r.json()));
 * await listRepos("agentauth");
 * ```
 */
export function withAccessToken<A extends unknown[], R>(
  client: AgentauthClient,
  opts: WithAccessTokenOptions,
  fn: (token: AccessToken, ...args: A) => R | Promise<R>,
): (...args: A) => Promise<R> {
  checkOptionKeys("withAccessToken", opts, [
    ...Object.keys(getAccessTokenOptionKeys),
    "onAuthorizationUrl",
    "waitTimeoutMs",
    "maxConsents",
  ]);
  const { onAuthorizationUrl, waitTimeoutMs, maxConsents = 2, ...tokenOpts } = opts;
  return async (...args: A): Promise<R> => {
    for (let consents = 0; ; consents++) {
      let token: AccessToken;
      try {
        token = await client.getAccessToken(tokenOpts);
      } catch (err) {
        if (!(err instanceof AuthorizationRequired)) {
          throw err;
        }
        if (consents >= maxConsents) {
          // Still no token after the consents it waited for: the caller
          // gets the last AuthorizationRequired, with its link.
          throw err;
        }
        await onAuthorizationUrl(err.authorizationUrl, err);
        await client.waitForAuthorization(err.sessionId, {
          ...(waitTimeoutMs === undefined ? {} : { timeoutMs: waitTimeoutMs }),
          ...(opts.signal === undefined ? {} : { signal: opts.signal }),
        });
        continue;
      }
      return fn(token, ...args);
    }
  };
}
