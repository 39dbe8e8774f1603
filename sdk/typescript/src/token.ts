// A ready access token. The token itself is held in a private field and
// read through an explicit getter, so that logging, inspecting or
// JSON-serialising the object never prints it (HOUSE_STYLE: secrets are
// a type that redacts itself).

const inspectSymbol = Symbol.for("nodejs.util.inspect.custom");

/** The wire form of a `ready` token answer. */
export interface ReadyTokenWire {
  status: "ready";
  accessToken: string;
  tokenType?: string;
  expiresAt?: string;
  scopes?: string[];
  ttlShorterThanRequested?: boolean;
  refreshable?: boolean;
  scopesNotGranted?: string[];
}

export class AccessToken {
  readonly #token: string;
  /** `Bearer`, usually. */
  readonly tokenType: string;
  /** When the token expires, when the provider said. */
  readonly expiresAt: Date | undefined;
  readonly scopes: readonly string[];
  /** The token has no more than minTtlSeconds left because the provider issues shorter-lived ones. */
  readonly ttlShorterThanRequested: boolean;
  /** The grant has a refresh token: the token is renewed without the user. */
  readonly refreshable: boolean;
  /** Protocol scopes (offline_access, openid) asked for and not granted. */
  readonly scopesNotGranted: readonly string[];

  constructor(wire: ReadyTokenWire) {
    this.#token = wire.accessToken;
    this.tokenType = wire.tokenType || "Bearer";
    this.expiresAt = wire.expiresAt ? new Date(wire.expiresAt) : undefined;
    this.scopes = Object.freeze([...(wire.scopes ?? [])]);
    this.ttlShorterThanRequested = wire.ttlShorterThanRequested === true;
    this.refreshable = wire.refreshable === true;
    this.scopesNotGranted = Object.freeze([...(wire.scopesNotGranted ?? [])]);
  }

  /** The token: send it to the provider's API, never to a log. */
  get accessToken(): string {
    return this.#token;
  }

  /** `Bearer <token>`, for an Authorization header. */
  authorizationHeader(): string {
    return `${this.tokenType} ${this.#token}`;
  }

  /** Seconds left (negative once expired); undefined when the expiry is unknown. */
  expiresIn(now: Date = new Date()): number | undefined {
    return this.expiresAt ? Math.floor((this.expiresAt.getTime() - now.getTime()) / 1000) : undefined;
  }

  toJSON(): Record<string, unknown> {
    return {
      accessToken: "[redacted]",
      tokenType: this.tokenType,
      expiresAt: this.expiresAt?.toISOString(),
      scopes: this.scopes,
      refreshable: this.refreshable,
    };
  }

  toString(): string {
    return `AccessToken(${this.tokenType}, [redacted], expires ${this.expiresAt?.toISOString() ?? "unknown"})`;
  }

  [inspectSymbol](): string {
    return this.toString();
  }
}
