// SigV4 for the AWS deployment: API Gateway authorizes the runtime routes
// with IAM (service `execute-api`) and the turn function's URL the
// streams (service `lambda`). The AWS packages are optional peer
// dependencies, loaded here with a dynamic import only when a client is
// made with auth "sigv4", so a token-only client (or a browser bundle)
// never pulls them in.

import { MissingCredentialError } from "./errors.js";

/** AWS credentials, as the AWS SDK's providers give them. */
export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string | undefined;
  expiration?: Date | undefined;
}

export type AwsCredentialProvider = () => Promise<AwsCredentials>;

export interface SignInput {
  method: string;
  url: URL;
  headers: Record<string, string>;
  body: string | undefined;
}

/** Signs a request for a service; returns the headers to add (Authorization, X-Amz-Date, …). */
export interface RequestSigner {
  sign(service: "execute-api" | "lambda", req: SignInput): Promise<Record<string, string>>;
}

// The optional peers' module names, in variables so that bundlers and tsc
// leave the imports alone when the packages are not installed.
const signatureV4Module = "@smithy/signature-v4";
const sha256Module = "@aws-crypto/sha256-js";
const providerModule = "@aws-sdk/credential-provider-node";

async function load<T>(name: string, what: string): Promise<T> {
  try {
    return (await import(name)) as T;
  } catch (err) {
    throw new MissingCredentialError({
      code: "missingCredential",
      message: `auth "sigv4" needs the package ${name} (${what}): npm install ${name}`,
      cause: err,
    });
  }
}

/** How long before their expiration credentials are asked for again. */
const refreshBeforeMs = 5 * 60_000;

/**
 * provider, asked once and again only when its credentials are within
 * five minutes of their expiration (never, for credentials without one).
 * Concurrent callers share one call; a failed call is not kept.
 */
export function memoizeCredentials(
  provider: AwsCredentialProvider,
  now: () => number = Date.now,
): AwsCredentialProvider {
  let current: AwsCredentials | undefined;
  let pending: Promise<AwsCredentials> | undefined;
  return () => {
    const exp = current?.expiration?.getTime();
    if (current && (exp === undefined || exp - now() > refreshBeforeMs)) {
      return Promise.resolve(current);
    }
    pending ??= provider().then(
      (c) => {
        current = c;
        pending = undefined;
        return c;
      },
      (err: unknown) => {
        pending = undefined;
        throw err;
      },
    );
    return pending;
  };
}

interface SignatureV4Ctor {
  new (init: {
    service: string;
    region: string;
    credentials: AwsCredentials | AwsCredentialProvider;
    sha256: unknown;
    uriEscapePath?: boolean;
  }): {
    sign(req: {
      method: string;
      protocol: string;
      hostname: string;
      port?: number | undefined;
      path: string;
      query: Record<string, string>;
      headers: Record<string, string>;
      body?: string | undefined;
    }): Promise<{ headers: Record<string, string> }>;
  };
}

/**
 * A signer for region with credentials, or the AWS SDK's default provider
 * chain (environment, shared config and SSO, web identity, container and
 * instance metadata) when credentials is undefined.
 */
export async function makeSigV4Signer(
  region: string | undefined,
  credentials: AwsCredentials | AwsCredentialProvider | undefined,
): Promise<RequestSigner> {
  if (!region) {
    throw new MissingCredentialError({
      code: "missingCredential",
      message: 'auth "sigv4" needs a region: pass region, or set AWS_REGION',
    });
  }
  const { SignatureV4 } = await load<{ SignatureV4: SignatureV4Ctor }>(signatureV4Module, "SigV4 signing");
  const { Sha256 } = await load<{ Sha256: unknown }>(sha256Module, "SigV4 hashing");
  let creds = credentials;
  if (creds === undefined) {
    const { defaultProvider } = await load<{ defaultProvider: () => AwsCredentialProvider }>(
      providerModule,
      "the default AWS credential chain",
    );
    creds = defaultProvider();
  }
  if (typeof creds === "function") {
    // SignatureV4 asks a provider on every request; the AWS SDK's own
    // clients memoize it first (fromIni reads files, fromTemporaryCredentials
    // calls STS), and so does this.
    creds = memoizeCredentials(creds);
  }
  const signers = new Map<string, InstanceType<SignatureV4Ctor>>();
  const signerFor = (service: string) => {
    let s = signers.get(service);
    if (!s) {
      s = new SignatureV4({ service, region, credentials: creds, sha256: Sha256 });
      signers.set(service, s);
    }
    return s;
  };
  return {
    async sign(service, req) {
      const query: Record<string, string> = {};
      for (const [k, v] of req.url.searchParams) {
        query[k] = v;
      }
      const headers: Record<string, string> = { ...req.headers, host: req.url.host };
      let signed: { headers: Record<string, string> };
      try {
        signed = await signerFor(service).sign({
          method: req.method,
          protocol: req.url.protocol,
          hostname: req.url.hostname,
          port: req.url.port ? Number(req.url.port) : undefined,
          path: req.url.pathname,
          query,
          headers,
          body: req.body,
        });
      } catch (err) {
        throw new MissingCredentialError({
          code: "missingCredential",
          message: `SigV4: no AWS credentials could be loaded (${err instanceof Error ? err.message : String(err)})`,
          cause: err,
        });
      }
      const out: Record<string, string> = {};
      for (const [k, v] of Object.entries(signed.headers)) {
        // fetch sets Host from the URL itself (and a browser refuses it).
        if (k.toLowerCase() !== "host" && req.headers[k] === undefined) {
          out[k] = v;
        }
      }
      return out;
    },
  };
}
