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

// The keys withAccessToken's options take (a type error when one is added to the interface and not here).
const withAccessTokenOptionKeys: Record<keyof WithAccessTokenOptions, true> = {
  ...getAccessTokenOptionKeys,
  onAuthorizationUrl: true,
  waitTimeoutMs: true,
  maxConsents: true,
};

/**
 * Wraps fn so that each call first gets a token for opts.app and passes
 * it as fn's first argument. When the user must consent, the wrapper
 * calls opts.onAuthorizationUrl with the URL, waits for the consent
 * (waitForAuthorization) and asks for the token again. Errors other than
 * a needed consent (and a consent that failed or expired:
 * AuthorizationFailed) are thrown to the caller.
 *
 * opts.signal cancels every call's token request and consent wait. A
 * call's own signal does too: when the wrapped function's last argument
 * is an object whose `signal` is an AbortSignal (`{signal}`, a Request),
 * that call's waits end at whichever of the two aborts first. The
 * argument is still passed to fn unchanged, for fn's own requests.
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
  checkOptionKeys("withAccessToken", opts, withAccessTokenOptionKeys);
  const { onAuthorizationUrl, waitTimeoutMs, maxConsents = 2, ...tokenOpts } = opts;
  return async (...args: A): Promise<R> => {
    const both = combine(opts.signal, callSignal(args));
    let token: AccessToken;
    try {
      token = await getToken(both.signal);
    } finally {
      both.dispose();
    }
    return fn(token, ...args);
  };

  async function getToken(signal: AbortSignal | undefined): Promise<AccessToken> {
    for (let consents = 0; ; consents++) {
      try {
        return await client.getAccessToken({ ...tokenOpts, signal });
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
          ...(signal === undefined ? {} : { signal }),
        });
      }
    }
  }
}

/** The signal of a call's last argument, when it is an object with an AbortSignal as `signal`. */
function callSignal(args: readonly unknown[]): AbortSignal | undefined {
  const last = args[args.length - 1];
  if (typeof last !== "object" || last === null || typeof AbortSignal === "undefined") {
    return undefined;
  }
  let s: unknown;
  try {
    s = (last as { signal?: unknown }).signal;
  } catch {
    // A getter that throws: not a signal to honour.
    return undefined;
  }
  return s instanceof AbortSignal ? s : undefined;
}

/**
 * A signal that aborts when a or b does (with its reason), and a dispose
 * that unhooks it from them. Not AbortSignal.any: it is missing before
 * Node 20.3 (engines: Node >= 20), and each combined signal stays linked
 * to the long-lived opts.signal until that one aborts (nodejs/node#54614),
 * where dispose unhooks it when the call ends.
 */
function combine(
  a: AbortSignal | undefined,
  b: AbortSignal | undefined,
): { signal: AbortSignal | undefined; dispose: () => void } {
  if (a === undefined || b === undefined || a === b) {
    return { signal: a ?? b, dispose: () => undefined };
  }
  const ctl = new AbortController();
  const onA = () => ctl.abort(a.reason);
  const onB = () => ctl.abort(b.reason);
  const dispose = () => {
    a.removeEventListener("abort", onA);
    b.removeEventListener("abort", onB);
  };
  if (a.aborted) {
    ctl.abort(a.reason);
  } else if (b.aborted) {
    ctl.abort(b.reason);
  } else {
    a.addEventListener("abort", onA, { once: true });
    b.addEventListener("abort", onB, { once: true });
  }
  return { signal: ctl.signal, dispose };
}
