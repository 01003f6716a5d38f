// A real OpenID provider for the tests of the gateway as an OAuth resource
// server: npm `oidc-provider` (panva, pinned in scripts/node/package.json and
// installed into .tools/node by scripts/install-test-deps.sh), configured the
// way an identity provider in front of MCP servers is, on 127.0.0.1. The Rust
// handle is mcp_test_support::idp::Idp.
//
//   node tests/interop/idp.mjs [--port N] [--config FILE]
//
// on Node 22 or later (.tools/node/node_modules/.bin/node on Linux x64).
//
// The port (also IDP_PORT; 0, the default, is any free one) is where it
// listens; the issuer is http://127.0.0.1:<port>. Once it listens it prints one
// line, `LISTENING <port>`, on stdout. The configuration (a JSON file, or the
// JSON text in IDP_CONFIG) holds:
//
//   clients           static clients: client_id, client_secret, groups (the
//                     `groups` claim of their client-credentials tokens),
//                     redirect_uris, and optionally grant_types, scope and
//                     token_endpoint_auth_method (client_secret_post by default)
//   users             accounts that can log in: id and groups (any other id
//                     logs in too, with no groups); the first is who logs in
//                     when the authorization request has no login_hint (`user`
//                     with none; POST /test/user changes it)
//   opaque_resources  resources whose access tokens are opaque (for
//                     introspection) instead of JWTs
//
// What it serves, besides the provider's own endpoints (discovery, also at
// /.well-known/oauth-authorization-server, JWKS, token, introspection,
// revocation, dynamic client registration):
//
// - JWT access tokens (RS256, `typ` at+jwt) for any http(s) resource
//   indicator (RFC 8707): `aud` is the resource, scopes `tools:read` and
//   `tools:call`, and a `groups` claim (the client's for client credentials,
//   the user's for user tokens);
// - the authorization code flow with PKCE, headless: the login interaction
//   (GET /interaction/<uid>) logs in the user named by `login_hint` (or the
//   default user) at once and consent is implied (a consent prompt, which
//   native clients and `prompt=consent` get, is given at once), so following
//   the redirects with the cookies they set leads straight back to the client
//   with a code;
// - dynamic client registration (open, at /reg): a client may register for
//   the authorization code flow as MCP clients do; resource scopes in the
//   `scope` it asks for are dropped (they are granted per resource);
// - token exchange (RFC 8693): a valid JWT access token of this provider as
//   subject_token buys a new JWT for another resource, keeping `sub` and
//   `groups`, with `act` naming the exchanging client;
// - test controls: POST /test/rotate signs from then on with a new RSA key
//   (the JWKS keeps serving the old ones after it) and answers {"kid": ...};
//   POST /test/user?id=<id> sets the default user; GET /test/requests counts
//   the requests served by path.
//
// Keys are generated at start, nothing is written to disk. Quiet unless
// IDP_DEBUG is set (then the provider's notices, server errors and refused
// grants go to stderr).
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const debug = Boolean(process.env.IDP_DEBUG);
// oidc-provider prints notices about its defaults with console.info (stdout,
// which carries the LISTENING line) and console.warn, some as it loads.
for (const method of ['log', 'info', 'warn', 'debug']) {
    console[method] = debug ? (...args) => console.error(...args) : () => {};
}

// The package lives in .tools/node/node_modules, which is no ancestor of this
// file: import it by the entry its package.json names.
const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '.tools', 'node', 'node_modules', 'oidc-provider');
const { main } = JSON.parse(fs.readFileSync(join(PACKAGE, 'package.json'), 'utf8'));
const { default: Provider, errors } = await import(pathToFileURL(join(PACKAGE, main)).href);

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const JWT_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:jwt';
const RESOURCE_SCOPES = ['tools:read', 'tools:call'];
const OIDC_SCOPES = ['openid', 'offline_access'];

const { values: args } = parseArgs({
    options: {
        port: { type: 'string' },
        config: { type: 'string' },
    },
});
const port = Number(args.port ?? process.env.IDP_PORT ?? 0);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`--port must be a port number, got ${args.port ?? process.env.IDP_PORT}`);
}
const config = args.config
    ? JSON.parse(fs.readFileSync(args.config, 'utf8'))
    : JSON.parse(process.env.IDP_CONFIG ?? '{}');

const users = new Map((config.users ?? []).map((user) => [user.id, user]));
const opaqueResources = new Set(config.opaque_resources ?? []);
let defaultUser = config.users?.[0]?.id ?? 'user';

const clients = (config.clients ?? []).map(({ redirect_uris: redirectUris = [], ...client }) => {
    const interactive = redirectUris.length > 0;
    return {
        grant_types: [
            'client_credentials',
            TOKEN_EXCHANGE,
            ...(interactive ? ['authorization_code', 'refresh_token'] : []),
        ],
        response_types: interactive ? ['code'] : [],
        token_endpoint_auth_method: 'client_secret_post',
        groups: [],
        ...client,
        redirect_uris: redirectUris,
    };
});

// Signing keys, newest first: the provider signs with the first and serves
// them all in its JWKS.
const keys = [];
function newKey() {
    const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
    const jwk = privateKey.export({ format: 'jwk' });
    return { ...jwk, kid: `rsa-${crypto.randomBytes(6).toString('hex')}`, alg: 'RS256', use: 'sig' };
}
keys.unshift(newKey());

// Signs the provider's cookies, the same across rebuilds (see `build`), so
// that an interaction started before a key rotation finishes after it.
const cookieKeys = [crypto.randomBytes(32).toString('base64url')];

function isHttpUrl(value) {
    const url = URL.parse(value);
    return url?.protocol === 'http:' || url?.protocol === 'https:';
}

/** What oidc-provider needs to know about the resource server `resource`. */
function resourceServerInfo(resource) {
    if (!isHttpUrl(resource)) {
        throw new errors.InvalidTarget('resource indicator must be an http(s) URL');
    }
    if (opaqueResources.has(resource)) {
        return { scope: RESOURCE_SCOPES.join(' '), audience: resource, accessTokenFormat: 'opaque' };
    }
    return {
        scope: RESOURCE_SCOPES.join(' '),
        audience: resource,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: 'RS256' } },
    };
}

// The `groups` (and `act`) of tokens issued by token exchange, which come
// from the subject token, not from the client or an account.
const exchanged = new WeakMap();

async function extraTokenClaims(_ctx, token) {
    if (exchanged.has(token)) {
        return exchanged.get(token);
    }
    if (token.kind === 'ClientCredentials') {
        return { groups: token.client?.groups ?? [] };
    }
    if (token.accountId) {
        return { groups: users.get(token.accountId)?.groups ?? [] };
    }
    return undefined;
}

async function findAccount(_ctx, sub) {
    return {
        accountId: sub,
        async claims() {
            return { sub, groups: users.get(sub)?.groups ?? [] };
        },
    };
}

/**
 * Consent is implied: the grant holds whatever OpenID scopes and resource
 * scopes the request asked for.
 */
async function loadExistingGrant(ctx) {
    const { client, params, session } = ctx.oidc;
    const grant = new ctx.oidc.provider.Grant({ clientId: client.clientId, accountId: session.accountId });
    const requested = String(params.scope ?? '').split(' ').filter(Boolean);
    const oidc = requested.filter((scope) => OIDC_SCOPES.includes(scope));
    if (oidc.length) {
        grant.addOIDCScope(oidc.join(' '));
    }
    const resources = params.resource === undefined ? [] : [params.resource].flat();
    for (const resource of resources) {
        const scopes = requested.filter((scope) => RESOURCE_SCOPES.includes(scope));
        grant.addResourceScope(resource, scopes.join(' '));
    }
    await grant.save();
    return grant;
}

/** The payload of `jwt` if this provider signed it with one of its keys and it is unexpired. */
function verifyOwnJwt(jwt, issuer) {
    const parts = String(jwt).split('.');
    if (parts.length !== 3) {
        throw new errors.InvalidGrant('subject_token is not a JWT');
    }
    const [header, payload, signature] = parts;
    let decoded;
    try {
        decoded = {
            header: JSON.parse(Buffer.from(header, 'base64url')),
            payload: JSON.parse(Buffer.from(payload, 'base64url')),
        };
    } catch {
        throw new errors.InvalidGrant('subject_token is not a JWT');
    }
    const key = keys.find((candidate) => candidate.kid === decoded.header.kid);
    if (decoded.header.alg !== 'RS256' || !key) {
        throw new errors.InvalidGrant('subject_token is not signed by this provider');
    }
    const publicKey = crypto.createPublicKey({ key: { kty: key.kty, n: key.n, e: key.e }, format: 'jwk' });
    const valid = crypto.verify(
        'sha256',
        Buffer.from(`${header}.${payload}`),
        publicKey,
        Buffer.from(signature, 'base64url'),
    );
    if (!valid) {
        throw new errors.InvalidGrant('subject_token signature is invalid');
    }
    if (decoded.payload.iss !== issuer) {
        throw new errors.InvalidGrant('subject_token was issued by another issuer');
    }
    if (!(decoded.payload.exp > Date.now() / 1000)) {
        throw new errors.InvalidGrant('subject_token is expired');
    }
    return decoded.payload;
}

/** RFC 8693 token exchange for JWT access tokens of this provider. */
async function tokenExchange(ctx) {
    const { params, client, provider } = ctx.oidc;
    if (!params.subject_token) {
        throw new errors.InvalidRequest('missing required parameter subject_token');
    }
    if (![ACCESS_TOKEN_TYPE, JWT_TOKEN_TYPE].includes(params.subject_token_type)) {
        throw new errors.InvalidRequest(`subject_token_type must be ${ACCESS_TOKEN_TYPE} or ${JWT_TOKEN_TYPE}`);
    }
    if (params.requested_token_type && params.requested_token_type !== ACCESS_TOKEN_TYPE) {
        throw new errors.InvalidRequest(`only ${ACCESS_TOKEN_TYPE} can be requested`);
    }
    const target = params.resource ?? params.audience;
    if (!target) {
        throw new errors.InvalidTarget('resource or audience is required');
    }
    const subject = verifyOwnJwt(params.subject_token, provider.issuer);

    const held = new Set(String(subject.scope ?? '').split(' ').filter(Boolean));
    let scopes;
    if (params.scope) {
        scopes = params.scope.split(' ').filter(Boolean);
        const beyond = scopes.filter((scope) => !held.has(scope));
        if (beyond.length) {
            throw new errors.InvalidScope(`the subject token does not hold ${beyond.join(' ')}`);
        }
    } else {
        scopes = [...held];
    }
    scopes = scopes.filter((scope) => RESOURCE_SCOPES.includes(scope));

    const token = new provider.AccessToken({
        accountId: subject.sub,
        client,
        gty: TOKEN_EXCHANGE,
        scope: scopes.join(' ') || undefined,
    });
    token.resourceServer = new provider.ResourceServer(target, resourceServerInfo(target));
    exchanged.set(token, {
        groups: subject.groups ?? [],
        act: subject.act ? { sub: client.clientId, act: subject.act } : { sub: client.clientId },
    });
    ctx.oidc.entity('AccessToken', token);
    const value = await token.save();

    ctx.body = {
        access_token: value,
        issued_token_type: ACCESS_TOKEN_TYPE,
        token_type: token.tokenType,
        expires_in: token.expiration,
        scope: token.scope,
    };
}

/**
 * A provider for `issuer` that signs with `keys[0]`. The provider reads its
 * keys once, when built; a rotation builds a new one with the same clients,
 * cookie keys and storage (oidc-provider's in-memory adapter is shared by
 * every instance in the process), so registered clients, sessions, grants and
 * opaque tokens carry over.
 */
function build(issuer) {
    const provider = new Provider(issuer, {
        clients,
        jwks: { keys: structuredClone(keys) },
        cookies: { keys: cookieKeys },
        findAccount,
        extraTokenClaims,
        loadExistingGrant,
        extraClientMetadata: {
            properties: ['groups'],
            validator(_ctx, key, value) {
                if (key === 'groups' && value !== undefined
                    && !(Array.isArray(value) && value.every((group) => typeof group === 'string'))) {
                    throw new errors.InvalidClientMetadata('groups must be an array of strings');
                }
            },
        },
        scopes: OIDC_SCOPES,
        claims: { openid: ['sub', 'groups'] },
        interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
        issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
        pkce: { required: () => true },
        ttl: {
            AccessToken: 3600,
            AuthorizationCode: 60,
            ClientCredentials: 3600,
            Grant: 3600,
            IdToken: 3600,
            Interaction: 600,
            RefreshToken: 86400,
            Session: 3600,
        },
        async renderError(ctx, out) {
            ctx.type = 'json';
            ctx.body = out;
        },
        features: {
            devInteractions: { enabled: false },
            clientCredentials: { enabled: true },
            // Any confidential client (the gateway, say) may introspect any token.
            introspection: {
                enabled: true,
                allowedPolicy: async (_ctx, client, token) =>
                    client.clientAuthMethod !== 'none' || token.clientId === client.clientId,
            },
            revocation: { enabled: true },
            registration: { enabled: true },
            resourceIndicators: {
                enabled: true,
                getResourceServerInfo: async (_ctx, resource) => resourceServerInfo(resource),
                useGrantedResource: async () => true,
            },
        },
    });
    provider.use(registrationScopes);
    provider.registerGrantType(TOKEN_EXCHANGE, tokenExchange, [
        'subject_token',
        'subject_token_type',
        'requested_token_type',
        'resource',
        'audience',
        'scope',
    ]);
    if (debug) {
        provider.on('server_error', (_ctx, error) => console.error('idp: server error', error));
        provider.on('grant.error', (_ctx, error) => console.error('idp: grant error', error));
    }
    return { provider, handle: provider.callback() };
}

let current;

/**
 * The interactions, none of which waits for a person: the login logs in
 * `login_hint` (or the default user) at once; the consent prompt (which
 * oidc-provider shows native clients, and every client asking
 * `prompt=consent`, whatever the grant already holds) is given at once, for
 * whatever was asked.
 */
async function interaction(req, res) {
    const { provider } = current;
    const details = await provider.interactionDetails(req, res);
    const { prompt } = details;
    if (prompt.name === 'login') {
        const accountId = details.params.login_hint || defaultUser;
        await provider.interactionFinished(req, res, { login: { accountId } }, { mergeWithLastSubmission: false });
        return;
    }
    if (prompt.name !== 'consent') {
        throw new Error(`unexpected interaction prompt ${prompt.name}`);
    }
    const grant = details.grantId
        ? await provider.Grant.find(details.grantId)
        : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
    if (prompt.details.missingOIDCScope) {
        grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
    }
    for (const [indicator, scopes] of Object.entries(prompt.details.missingResourceScopes ?? {})) {
        grant.addResourceScope(indicator, scopes.join(' '));
    }
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

/**
 * Dynamic client registration (POST /reg) takes the resource scopes out of
 * the `scope` a client asks to register (RFC 7591 lets a server replace what
 * is asked): they are granted per resource (`resourceServerInfo`), not per
 * client, and oidc-provider refuses a registered scope it does not list as
 * its own. MCP clients register the scope a resource's challenge names.
 */
async function registrationScopes(ctx, next) {
    if (ctx.method !== 'POST' || ctx.path !== '/reg' || !ctx.is('application/json')) {
        return next();
    }
    const chunks = [];
    for await (const chunk of ctx.req) {
        chunks.push(chunk);
    }
    const text = Buffer.concat(chunks).toString('utf8');
    let body = text;
    try {
        const metadata = JSON.parse(text);
        if (metadata && typeof metadata.scope === 'string') {
            const kept = metadata.scope.split(' ').filter((scope) => scope && !RESOURCE_SCOPES.includes(scope));
            if (kept.length) {
                metadata.scope = kept.join(' ');
            } else {
                delete metadata.scope;
            }
            body = JSON.stringify(metadata);
        }
    } catch {
        // Not JSON: the provider refuses it as it would have.
    }
    // The provider reads a body already read from here (its fallback for
    // upstream body parsers).
    ctx.req.body = body;
    return next();
}

function json(res, status, body) {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
}

// Requests served, by path (GET /test/requests answers them): how often a
// resource server fetched the keys or the metadata.
const requests = {};

const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    requests[url.pathname] = (requests[url.pathname] ?? 0) + 1;
    if (req.method === 'GET' && url.pathname === '/test/requests') {
        json(res, 200, requests);
    } else if (req.method === 'POST' && url.pathname === '/test/rotate') {
        keys.unshift(newKey());
        current = build(current.provider.issuer);
        json(res, 200, { kid: keys[0].kid });
    } else if (req.method === 'POST' && url.pathname === '/test/user') {
        const id = url.searchParams.get('id');
        if (!id) {
            json(res, 400, { error: 'POST /test/user needs ?id=<account id>' });
            return;
        }
        defaultUser = id;
        json(res, 200, { default_user: defaultUser });
    } else if (req.method === 'GET' && url.pathname.startsWith('/interaction/')) {
        interaction(req, res).catch((error) => {
            if (debug) {
                console.error('idp: interaction failed', error);
            }
            if (!res.headersSent) {
                json(res, 400, { error: 'interaction_failed', error_description: error.message });
            }
        });
    } else {
        if (req.method === 'GET' && url.pathname === '/.well-known/oauth-authorization-server') {
            // RFC 8414 metadata, which MCP clients ask for first: the same document.
            req.url = '/.well-known/openid-configuration';
        }
        current.handle(req, res);
    }
});

server.listen(port, '127.0.0.1', () => {
    const { port: bound } = server.address();
    current = build(`http://127.0.0.1:${bound}`);
    process.stdout.write(`LISTENING ${bound}\n`);
});
