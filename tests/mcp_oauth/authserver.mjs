// A real OAuth 2.1 authorization server for the tests: the npm package oidc-provider (pinned in
// authserver.py), configured from the JSON in argv[2] and listening on 127.0.0.1.
//
//   node authserver.mjs '{"package": "/abs/path/node_modules/oidc-provider", ...}'
//
// It prints `READY http://127.0.0.1:PORT` on stdout once it accepts connections (the port is
// chosen by the kernel and the provider built after the listen, so the issuer always names the
// port really bound). The configuration is described in authserver.py (AuthServer); a few
// endpoints under /test/ change it or act on it at run time.

import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const config = JSON.parse(process.argv[2] ?? '{}');
// oidc-provider lives in the test cache, not next to this file: an ES module's bare imports
// ignore NODE_PATH, so it is imported by path.
const { default: Provider, errors: { InvalidTarget } } = await import(
  pathToFileURL(join(config.package, 'lib', 'index.js')).href);

// ------------------------------------------------------------------------------------------
// Storage: oidc-provider's adapter interface over one Map, so /test/revoke can find every
// token, grant and session of an account (the bundled memory adapter indexes by grant only).
// ------------------------------------------------------------------------------------------

const store = new Map(); // `${model}:${id}` -> { model, payload, expiresAt }
const now = () => Date.now();

function live(key) {
  const entry = store.get(key);
  if (entry && entry.expiresAt !== undefined && entry.expiresAt <= now()) {
    store.delete(key);
    return undefined;
  }
  return entry;
}

class Adapter {
  constructor(model) { this.model = model; }

  key(id) { return `${this.model}:${id}`; }

  async upsert(id, payload, expiresIn) {
    const expiresAt = typeof expiresIn === 'number' ? now() + expiresIn * 1000 : undefined;
    store.set(this.key(id), { model: this.model, payload, expiresAt });
  }

  async find(id) { return live(this.key(id))?.payload; }

  async findByUid(uid) { return this.findBy((p) => p.uid === uid); }

  async findByUserCode(userCode) { return this.findBy((p) => p.userCode === userCode); }

  findBy(match) {
    for (const [key, entry] of store) {
      if (entry.model === this.model && live(key) && match(entry.payload)) return entry.payload;
    }
    return undefined;
  }

  async consume(id) {
    const entry = live(this.key(id));
    if (entry) entry.payload.consumed = Math.floor(now() / 1000);
  }

  async destroy(id) { store.delete(this.key(id)); }

  async revokeByGrantId(grantId) {
    for (const [key, entry] of store) {
      if (entry.payload.grantId === grantId) store.delete(key);
    }
  }
}

// Everything that lets `sub` act: its tokens and codes, its grants (consent), its sessions
// (so the next authorization asks it to sign in again).
const ACCOUNT_MODELS = new Set(['AccessToken', 'RefreshToken', 'AuthorizationCode', 'Grant', 'Session']);

function revokeAccount(sub) {
  let revoked = 0;
  for (const [key, entry] of store) {
    if (ACCOUNT_MODELS.has(entry.model) && entry.payload.accountId === sub) {
      store.delete(key);
      if (entry.model === 'AccessToken' || entry.model === 'RefreshToken') revoked += 1;
    }
  }
  return revoked;
}

// ------------------------------------------------------------------------------------------
// The provider
// ------------------------------------------------------------------------------------------

// resource URL -> the scopes a token for it may carry ("mcp:tools notes:write")
const resources = new Map(Object.entries(config.resources ?? {}));
const settings = {
  access_token_ttl: config.access_token_ttl ?? 300,
  refresh_token_ttl: config.refresh_token_ttl ?? 86400,
  limit_client_scope: Boolean(config.limit_client_scope),
  no_s256: Boolean(config.no_s256),
  wrong_iss: Boolean(config.wrong_iss),
};

const server = createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(0, '127.0.0.1', resolve);
});
const issuer = `http://127.0.0.1:${server.address().port}`;

function hasRefreshGrant(client) { return client.grantTypeAllowed('refresh_token'); }

const provider = new Provider(issuer, {
  adapter: Adapter,
  clients: config.clients ?? [],
  // any login is an account whose `sub` is that login (devInteractions asks for any name)
  async findAccount(ctx, sub) {
    return { accountId: sub, async claims() { return { sub }; } };
  },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  // every scope a resource server may carry is a scope the server supports: a client may
  // register with `scope` (RFC 7591) only from these
  scopes: [...new Set(['openid', 'offline_access', ...(config.scopes ?? [])])],
  responseTypes: ['code'], // OAuth 2.1: no implicit flow
  pkce: { required: () => true }, // every client, public or confidential; S256 only
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true }, // open: no initial access token
    introspection: { enabled: true },
    revocation: { enabled: true },
    // machine to machine: a client's own token (an item signed in per workspace)
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // no resource named, none assumed: the token would be for no resource server
      defaultResource: async (ctx, client, oneOf) => oneOf,
      getResourceServerInfo: async (ctx, resource) => {
        if (!resources.has(resource)) throw new InvalidTarget(); // unknown resource: refused
        return {
          scope: resources.get(resource),
          audience: resource,
          accessTokenTTL: settings.access_token_ttl,
          accessTokenFormat: 'opaque',
        };
      },
    },
  },
  // a refresh token for every code grant of a client allowed refresh_token, offline_access or
  // not, rotated on each use; tokens do not end with the browser session
  issueRefreshToken: async (ctx, client) => hasRefreshGrant(client),
  rotateRefreshToken: true,
  expiresWithSession: async () => false,
  ttl: {
    AccessToken: () => settings.access_token_ttl,
    RefreshToken: () => settings.refresh_token_ttl,
  },
});
// The provider answers a failure of its own with a bare 500: say what it was on stderr
// (AuthServer.stderr). Its development warnings (runtime, keys, devInteractions) go there too.
provider.on('server_error', (ctx, err) => console.error('server_error', err));

const METADATA_PATHS = new Set(['/.well-known/openid-configuration',
  '/.well-known/oauth-authorization-server']);

async function readJson(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString() || '{}';
  return JSON.parse(text);
}

function reply(ctx, status, body) {
  ctx.status = status;
  ctx.body = body;
}

// /test/... : controls for the tests (loopback only, like the whole server)
provider.use(async (ctx, next) => {
  if (!ctx.path.startsWith('/test/')) return next();
  if (ctx.method !== 'POST' && ctx.path !== '/test/config') return reply(ctx, 405, { error: 'POST' });
  switch (ctx.path) {
    case '/test/revoke': {
      const sub = ctx.query.sub;
      if (!sub) return reply(ctx, 400, { error: 'sub= is required' });
      return reply(ctx, 200, { sub, revoked: revokeAccount(sub) });
    }
    case '/test/resources': {
      const { resource, scope } = await readJson(ctx.req);
      if (!resource || typeof scope !== 'string') {
        return reply(ctx, 400, { error: 'resource and scope are required' });
      }
      resources.set(resource, scope);
      return reply(ctx, 200, { resources: Object.fromEntries(resources) });
    }
    case '/test/config': {
      if (ctx.method === 'POST') {
        const changes = await readJson(ctx.req);
        for (const [name, value] of Object.entries(changes)) {
          if (!(name in settings)) return reply(ctx, 400, { error: `unknown setting ${name}` });
          settings[name] = value;
        }
      }
      return reply(ctx, 200, { ...settings, resources: Object.fromEntries(resources) });
    }
    default:
      return reply(ctx, 404, { error: 'no such control' });
  }
});

// RFC 8414 metadata at its own well-known path (oidc-provider serves only the OpenID one),
// and the fault that hides S256 from both.
provider.use(async (ctx, next) => {
  const isMetadata = METADATA_PATHS.has(ctx.path);
  if (ctx.path === '/.well-known/oauth-authorization-server') {
    ctx.path = '/.well-known/openid-configuration';
  }
  await next();
  if (isMetadata && ctx.status === 200 && settings.no_s256) {
    ctx.body = { ...ctx.body, code_challenge_methods_supported: ['plain'] };
  }
});

// A client registered with `scope` may ask for no other scope later (oidc-provider's reading of
// RFC 7591), so MCP's step-up to a scope it did not register would fail: unless
// limit_client_scope, a registration's `scope` is dropped before the provider reads it (it
// takes a body parsed upstream as its own).
provider.use(async (ctx, next) => {
  if (!settings.limit_client_scope && ctx.method === 'POST' && ctx.path === '/reg'
      && ctx.is('application/json')) {
    const body = await readJson(ctx.req);
    if (body && typeof body === 'object') delete body.scope;
    ctx.req.body = body;
  }
  return next();
});

// The fault that makes the authorization response name another issuer (RFC 9207 `iss`).
provider.use(async (ctx, next) => {
  await next();
  const location = ctx.response.get('Location');
  if (!settings.wrong_iss || !location) return;
  const url = URL.parse(location);
  if (url?.searchParams.has('iss')) {
    url.searchParams.set('iss', 'http://127.0.0.1:1/not-the-issuer');
    ctx.set('Location', url.href);
  }
});

server.on('request', provider.callback());
console.log(`READY ${issuer}`);
