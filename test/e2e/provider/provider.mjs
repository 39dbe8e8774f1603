// Test/demo OpenID provider for agentauth end-to-end tests.
//
// A real oidc-provider (panva) with its built-in development interactions
// (login + consent pages), configured the way agentauth's broker needs it:
// Authorization Code + PKCE (S256 only, required for every client),
// refresh tokens always issued and rotated on every use, userinfo,
// revocation (RFC 7009), introspection (RFC 7662) and device authorization
// (RFC 8628). Everything is kept in memory; restart = clean slate.
//
// Configuration (environment):
//   PROVIDER_PORT              port to listen on, 127.0.0.1 only (default 9090; 0 = any free port)
//   PROVIDER_ISSUER            issuer URL (default http://127.0.0.1:<port>)
//   PROVIDER_ACCESS_TOKEN_TTL  access token lifetime in seconds (default 3600)
//   PROVIDER_REFRESH_TOKEN_TTL refresh token lifetime in seconds (default 14 days)
//   PROVIDER_CLIENTS_JSON      JSON array of oidc-provider client metadata (default: the demo clients)
//   PROVIDER_TEST_STATS        "1" enables GET /__stats (test-only counters)
//   PROVIDER_COOKIE_KEYS       comma separated cookie signing keys (default: random per process)
//   PROVIDER_MCP_RESOURCE      agentauth's MCP resource, its /mcp URL (default http://127.0.0.1:8080/mcp)
//   PROVIDER_CONSOLE_REDIRECTS comma separated redirect URIs added to agentauth-console's
//                              (default only http://127.0.0.1:8080/console/auth/callback)
//
// Operator sign-in for agentauth's console: the demo client
// agentauth-console (secret console-secret, client_secret_basic,
// authorization_code only, PKCE as every client). Console roles are ID-token
// claims (and userinfo claims) of the openid scope, chosen by login name:
//   admin           agentauth_roles ["agentauth:platform-admin"]
//   <tenant>-admin  agentauth_roles ["agentauth:admin"], tenant_id "<tenant>"
//                   (acme-admin → tenant acme, demo-admin → tenant demo)
//   any other login neither claim
// They are in the ID token of every client (a login name no other test uses).
//
// Agent JWTs for agentauth's tool routes: the client_credentials grant with
// resource=urn:agentauth:tools gives a JWT access token (RS256, signed with
// the key at /jwks; aud urn:agentauth:tools; scope from profile.read and
// agentauth:admin). A token for the demo client agentauth-agent also
// carries tenant_id "demo", skills ["connect-demo"] and
// agentauth_subjects.user "demo:user:alice": the demo agent acts for alice.
// resource=<PROVIDER_MCP_RESOURCE> gives the same JWT with that audience:
// the token agentauth's /mcp accepts (`make run` passes its own /mcp URL).
//
// stdout carries JSON lines only. The first is
//   {"event":"listening","issuer":"http://127.0.0.1:NNNN"}
// and the rest are provider events. Token values are never logged.

import * as crypto from 'node:crypto';
import * as http from 'node:http';

// oidc-provider prints its NOTICE lines with console.info (stdout). Keep
// stdout machine readable: route console.info/console.log to stderr before the
// library is loaded (hence the dynamic import below).
console.info = (...args) => console.error(...args);
console.log = (...args) => console.error(...args);

const { default: Provider, errors: oidcErrors } = await import('oidc-provider');

// The resource (and audience) of agent JWTs for agentauth's tool routes.
const TOOLS_RESOURCE = 'urn:agentauth:tools';
const TOOLS_SCOPES = 'profile.read agentauth:admin';

function emit(obj) {
  process.stdout.write(`${JSON.stringify({ ts: new Date().toISOString(), ...obj })}\n`);
}

function fatal(msg, err) {
  process.stderr.write(`provider: ${msg}${err ? `: ${err.stack || err}` : ''}\n`);
  process.exit(1);
}

function intFromEnv(name, def) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return def;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) fatal(`${name} must be a non-negative integer, got ${JSON.stringify(raw)}`);
  return n;
}

const port = intFromEnv('PROVIDER_PORT', 9090);
const accessTokenTTL = intFromEnv('PROVIDER_ACCESS_TOKEN_TTL', 3600);
const refreshTokenTTL = intFromEnv('PROVIDER_REFRESH_TOKEN_TTL', 14 * 24 * 60 * 60);
const statsEnabled = process.env.PROVIDER_TEST_STATS === '1';

// The resources the demo agent may get a JWT for: the tool routes' and
// agentauth's MCP server, whose JWTs must name its /mcp URL (RFC 8707).
const mcpResource = process.env.PROVIDER_MCP_RESOURCE || 'http://127.0.0.1:8080/mcp';
{
  let u;
  try {
    u = new URL(mcpResource);
  } catch {
    fatal(`PROVIDER_MCP_RESOURCE must be an absolute http(s) URL, got ${JSON.stringify(mcpResource)}`);
  }
  if (!['http:', 'https:'].includes(u.protocol) || u.hash) fatal(`PROVIDER_MCP_RESOURCE must be an http(s) URL without fragment, got ${JSON.stringify(mcpResource)}`);
}
const agentResources = new Set([TOOLS_RESOURCE, mcpResource]);

if (accessTokenTTL < 1) fatal('PROVIDER_ACCESS_TOKEN_TTL must be >= 1');
if (refreshTokenTTL < 1) fatal('PROVIDER_REFRESH_TOKEN_TTL must be >= 1');

const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

// agentauth's console callback under `make run`, and any a test adds.
const consoleRedirects = [
  'http://127.0.0.1:8080/console/auth/callback',
  ...(process.env.PROVIDER_CONSOLE_REDIRECTS || '').split(',').map((u) => u.trim()).filter(Boolean),
];

const defaultClients = [
  {
    client_id: 'agentauth-demo',
    client_secret: 'demo-secret',
    client_name: 'agentauth demo',
    redirect_uris: [
      'http://127.0.0.1:8080/oauth/callback/demo-global',
      'http://127.0.0.1:8080/oauth/callback/demo-user',
    ],
    grant_types: ['authorization_code', 'refresh_token', DEVICE_CODE_GRANT],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  },
  {
    // Same as agentauth-demo but authenticating with client_secret_post.
    client_id: 'agentauth-demo-post',
    client_secret: 'demo-secret',
    client_name: 'agentauth demo (client_secret_post)',
    redirect_uris: [
      'http://127.0.0.1:8080/oauth/callback/demo-global',
      'http://127.0.0.1:8080/oauth/callback/demo-user',
    ],
    grant_types: ['authorization_code', 'refresh_token', DEVICE_CODE_GRANT],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_post',
  },
  {
    // The demo agent: client credentials → a JWT for the tool routes.
    client_id: 'agentauth-agent',
    client_secret: 'agent-secret',
    client_name: 'agentauth demo agent',
    redirect_uris: [],
    grant_types: ['client_credentials'],
    response_types: [],
    scope: TOOLS_SCOPES,
    token_endpoint_auth_method: 'client_secret_basic',
  },
  {
    // Operator sign-in to agentauth's console (OpenID Connect, code + PKCE).
    client_id: 'agentauth-console',
    client_secret: 'console-secret',
    client_name: 'agentauth console',
    redirect_uris: [...new Set(consoleRedirects)],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  },
];

// extraTokenClaims of the demo agent's JWTs.
const agentClaims = {
  'agentauth-agent': { tenant_id: 'demo', skills: ['connect-demo'], agentauth_subjects: { user: 'demo:user:alice' } },
};

let clients = defaultClients;
if (process.env.PROVIDER_CLIENTS_JSON) {
  try {
    clients = JSON.parse(process.env.PROVIDER_CLIENTS_JSON);
  } catch (err) {
    fatal('PROVIDER_CLIENTS_JSON is not valid JSON', err);
  }
  if (!Array.isArray(clients)) fatal('PROVIDER_CLIENTS_JSON must be a JSON array of client metadata objects');
}

const cookieKeys = process.env.PROVIDER_COOKIE_KEYS
  ? process.env.PROVIDER_COOKIE_KEYS.split(',').filter(Boolean)
  : [crypto.randomBytes(32).toString('base64url'), crypto.randomBytes(32).toString('base64url')];

// Signing key for ID tokens: a fresh RSA key per process.
const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingJwk = {
  ...privateKey.export({ format: 'jwk' }), kid: `dev-${crypto.randomBytes(6).toString('hex')}`, use: 'sig', alg: 'RS256',
};

// Accounts: any login is accepted, the account id (sub) is the login name.
function titleCase(s) {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

// consoleRoleClaims are the console's role claims of a login (see header).
function consoleRoleClaims(login) {
  if (login === 'admin') return { agentauth_roles: ['agentauth:platform-admin'] };
  const m = /^(.+)-admin$/.exec(login);
  if (m) return { agentauth_roles: ['agentauth:admin'], tenant_id: m[1] };
  return {};
}

async function findAccount(_ctx, sub) {
  if (typeof sub !== 'string' || sub === '') return undefined;
  return {
    accountId: sub,
    async claims() {
      const local = sub.toLowerCase().replace(/[^a-z0-9._-]/g, '_') || 'user';
      return {
        sub,
        name: titleCase(sub),
        email: `${local}@example.test`,
        email_verified: true,
        ...consoleRoleClaims(sub),
      };
    },
  };
}

// ---------------------------------------------------------------- stats
const stats = {
  grants: {}, // successful token endpoint grants by grant_type
  grant_errors: {}, // failed token endpoint requests by grant_type
  refresh_failures: 0, // failed refresh_token grants (any reason)
  refresh_reuse: 0, // refresh_token grants that presented an already rotated token
  refresh_rotations: 0, // refresh tokens consumed by rotation
  revocations: 0, // successful calls to the revocation endpoint
  grants_revoked: 0, // grants revoked (revocation endpoint or refresh token reuse)
  authorizations: 0, // successful authorization responses (code issued)
  userinfo: 0, // userinfo responses with status 200
  userinfo_errors: 0,
  introspections: 0, // introspection responses with status 200
  device_authorizations: 0,
};

function inc(map, key) {
  map[key] = (map[key] || 0) + 1;
}

function grantTypeOf(ctx) {
  return ctx.oidc?.params?.grant_type || ctx.request?.body?.grant_type || 'unknown';
}

function clientIdOf(ctx) {
  return ctx.oidc?.client?.clientId || ctx.oidc?.params?.client_id;
}

// ---------------------------------------------------------------- provider
async function start() {
  const server = http.createServer();
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  const actualPort = server.address().port;
  const issuer = process.env.PROVIDER_ISSUER || `http://127.0.0.1:${actualPort}`;

  const configuration = {
    clients,
    clientDefaults: {
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
      id_token_signed_response_alg: 'RS256',
    },
    jwks: { keys: [signingJwk] },
    findAccount,
    claims: {
      // The console's role claims belong to openid: with conformIdTokenClaims
      // (the default) a code flow's ID token carries the openid scope's
      // claims only; profile and email stay in userinfo.
      openid: ['sub', 'agentauth_roles', 'tenant_id'],
      profile: ['name'],
      email: ['email', 'email_verified'],
    },
    scopes: ['openid', 'offline_access', 'profile', 'email', 'notes:read', 'profile.read', 'agentauth:admin'],
    extraTokenClaims: async (_ctx, token) => (token.kind === 'ClientCredentials' ? agentClaims[token.clientId] : undefined),
    pkce: {
      // PKCE for every client; oidc-provider v9 only supports S256.
      required: () => true,
    },
    // Refresh tokens for every client allowed to use the refresh_token grant,
    // whether or not offline_access was requested (oidc-provider drops
    // offline_access unless prompt=consent is sent).
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    // Rotate on every use. Presenting an already rotated refresh token fails
    // with invalid_grant and revokes the whole grant (see README).
    rotateRefreshToken: true,
    // Tokens must not die with the browser session (the broker uses them
    // long after the user's browser is gone).
    expiresWithSession: async () => false,
    ttl: {
      AccessToken: accessTokenTTL,
      AuthorizationCode: 60,
      DeviceCode: 600,
      Grant: 14 * 24 * 60 * 60,
      ClientCredentials: 3600,
      IdToken: 3600,
      Interaction: 3600,
      RefreshToken: refreshTokenTTL,
      Session: 14 * 24 * 60 * 60,
    },
    cookies: {
      keys: cookieKeys,
      // Over plain http oidc-provider does not set the Secure attribute (it
      // only does when the request is https), so SameSite=Lax cookies work
      // on http://127.0.0.1 in Chromium.
      long: { httpOnly: true, sameSite: 'lax', signed: true },
      short: { httpOnly: true, sameSite: 'lax', signed: true },
    },
    features: {
      devInteractions: { enabled: true },
      userinfo: { enabled: true },
      revocation: { enabled: true },
      introspection: { enabled: true },
      deviceFlow: { enabled: true },
      rpInitiatedLogout: { enabled: true },
      // Opaque access tokens for every OAuth flow the broker runs (no
      // resource parameter, no JWT), and no DPoP, so plain bearer tokens
      // are what we test. Only a client_credentials request for
      // TOOLS_RESOURCE or the MCP resource gets a JWT: the agent's token
      // for the tool routes or for /mcp.
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: async (_ctx, _client, oneOf) => oneOf,
        useGrantedResource: async () => false,
        getResourceServerInfo: async (_ctx, resource) => {
          if (!agentResources.has(resource)) throw new oidcErrors.InvalidTarget();
          return {
            scope: TOOLS_SCOPES, audience: resource, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
      dPoP: { enabled: false },
    },
    renderError: async (ctx, out) => {
      ctx.type = 'html';
      const esc = (v) => String(v).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
      ctx.body = `<!DOCTYPE html><html><head><meta charset="utf-8"><title>oops! something went wrong</title></head>`
        + `<body><h1>oops! something went wrong</h1>${Object.entries(out).map(([k, v]) => `<pre><strong>${esc(k)}</strong>: ${esc(v)}</pre>`).join('')}</body></html>`;
    },
  };

  let provider;
  try {
    provider = new Provider(issuer, configuration);
  } catch (err) {
    fatal('invalid provider configuration', err);
  }

  // Static clients are only validated when first used; validate them now so
  // a bad PROVIDER_CLIENTS_JSON fails the start instead of a later request.
  for (const metadata of clients) {
    try {
      // eslint-disable-next-line no-await-in-loop
      const client = await provider.Client.find(String(metadata?.client_id));
      if (!client) throw new Error('not found after registration');
    } catch (err) {
      fatal(`invalid client ${JSON.stringify(metadata?.client_id)} (${err.error_description || err.message})`);
    }
  }

  // Runs around every request the provider handles.
  provider.use(async (ctx, next) => {
    if (ctx.path === '/__stats') {
      if (!statsEnabled) {
        ctx.status = 404;
        ctx.body = { error: 'not_found', error_description: 'set PROVIDER_TEST_STATS=1 to enable /__stats' };
        return;
      }
      if (ctx.method !== 'GET') {
        ctx.status = 405;
        return;
      }
      ctx.set('cache-control', 'no-store');
      ctx.body = stats;
      return;
    }
    await next();
    const route = ctx.oidc?.route;
    if (ctx.method !== 'POST' && ctx.method !== 'GET') return;
    switch (route) {
      case 'revocation':
        if (ctx.status === 200) stats.revocations += 1;
        emit({
          event: 'revocation', status: ctx.status, client_id: clientIdOf(ctx), token_type_hint: ctx.oidc?.params?.token_type_hint,
        });
        break;
      case 'introspection':
        if (ctx.status === 200) stats.introspections += 1;
        emit({
          event: 'introspection', status: ctx.status, client_id: clientIdOf(ctx), active: ctx.body?.active,
        });
        break;
      case 'userinfo':
        if (ctx.status === 200) stats.userinfo += 1;
        else stats.userinfo_errors += 1;
        emit({ event: 'userinfo', status: ctx.status, sub: ctx.status === 200 ? ctx.body?.sub : undefined });
        break;
      default:
    }
  });

  provider.on('grant.success', (ctx) => {
    const gt = grantTypeOf(ctx);
    inc(stats.grants, gt);
    emit({
      event: 'grant.success', grant_type: gt, client_id: clientIdOf(ctx), sub: ctx.oidc?.account?.accountId,
    });
  });
  provider.on('grant.error', (ctx, err) => {
    const gt = grantTypeOf(ctx);
    inc(stats.grant_errors, gt);
    if (gt === 'refresh_token') {
      stats.refresh_failures += 1;
      if (err?.error_detail === 'refresh token already used') stats.refresh_reuse += 1;
    }
    emit({
      event: 'grant.error', grant_type: gt, client_id: clientIdOf(ctx), error: err?.error, error_detail: err?.error_detail || err?.error_description,
    });
  });
  provider.on('grant.revoked', (ctx, grantId) => {
    stats.grants_revoked += 1;
    emit({ event: 'grant.revoked', route: ctx?.oidc?.route, client_id: clientIdOf(ctx), grant_id: grantId });
  });
  provider.on('refresh_token.consumed', (token) => {
    stats.refresh_rotations += 1;
    emit({ event: 'refresh_token.consumed', client_id: token.clientId, grant_id: token.grantId });
  });
  provider.on('authorization.success', (ctx) => {
    stats.authorizations += 1;
    emit({ event: 'authorization.success', client_id: clientIdOf(ctx), sub: ctx.oidc?.session?.accountId });
  });
  provider.on('authorization.error', (ctx, err) => {
    emit({
      event: 'authorization.error', client_id: clientIdOf(ctx), error: err?.error, error_detail: err?.error_detail || err?.error_description,
    });
  });
  provider.on('device_authorization.success', (ctx) => {
    stats.device_authorizations += 1;
    emit({ event: 'device_authorization.success', client_id: clientIdOf(ctx) });
  });
  provider.on('interaction.started', (ctx, prompt) => {
    emit({ event: 'interaction.started', client_id: clientIdOf(ctx), prompt: prompt?.name });
  });
  provider.on('interaction.ended', (ctx) => {
    emit({ event: 'interaction.ended', client_id: clientIdOf(ctx) });
  });
  for (const name of ['revocation.error', 'introspection.error', 'userinfo.error', 'device_authorization.error', 'code_verification.error']) {
    provider.on(name, (ctx, err) => {
      emit({
        event: name, client_id: clientIdOf(ctx), error: err?.error, error_detail: err?.error_detail || err?.error_description,
      });
    });
  }
  provider.on('server_error', (ctx, err) => {
    emit({ event: 'server_error', path: ctx?.path, error: String(err?.message || err) });
    process.stderr.write(`provider: server_error: ${err?.stack || err}\n`);
  });

  server.on('request', provider.callback());

  const shutdown = (signal) => {
    emit({ event: 'shutdown', signal });
    server.close();
    server.closeAllConnections?.();
    process.exit(0);
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));

  process.stdout.write(`${JSON.stringify({ event: 'listening', issuer })}\n`);
}

start().catch((err) => fatal('failed to start', err));

