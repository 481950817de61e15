// A real OpenID provider for the identity tests: the certified `oidc-provider` package, run on
// loopback with a fresh key set.
//
// Argument: the directory of the installed npm packages (.ci/node.sh). Environment: AUDIENCE, the
// resource its access tokens are for. Prints one JSON line, {"issuer": ...}, once it listens.
//
// Machine clients (client credentials, secret "secret-<id>") get JWT access tokens for AUDIENCE (or
// the resource they ask for),
// signed with the algorithm their id names and carrying the groups CLIENTS gives them:
//   svc-rs256, svc-ps256, svc-es256, svc-eddsa.
// People sign in through the provider's development login form at the browser client `gateway-web`
// (secret "secret-gateway-web"); any login is accepted, the account `ops-<name>` is in the group
// "ops", every other in "staff", and the ID token carries the groups.
//
// Control routes, for the tests only:
//   POST /_control/rotate  every signing key replaced by a new one (new kids; the old ones removed)
//   POST /_control/break   the JWKS endpoint answers 500 until /_control/mend
//   POST /_control/redirect?uri=U   the browser client's redirect URI becomes U (the keys stay)
import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const modules = path.join(process.argv[2], 'node_modules');
const { default: Provider } = await import(pathToFileURL(path.join(modules, 'oidc-provider', 'lib', 'index.js')));
const jose = await import(pathToFileURL(path.join(modules, 'jose', 'dist', 'webapi', 'index.js')));

const AUDIENCE = process.env.AUDIENCE;
let redirectUri = 'http://127.0.0.1/unused';
const CLIENTS = {
  'svc-rs256': { alg: 'RS256', groups: ['ops'] },
  'svc-ps256': { alg: 'PS256', groups: ['staff'] },
  'svc-es256': { alg: 'ES256', groups: ['staff', 'ops'] },
  'svc-eddsa': { alg: 'EdDSA', groups: ['staff'] },
};
const KEY_TYPES = [
  ['RS256', {}],
  ['PS256', {}],
  ['ES256', {}],
  ['EdDSA', { crv: 'Ed25519' }],
];

let generation = 0;
let broken = false;

async function signingKeys() {
  generation += 1;
  const keys = [];
  for (const [alg, options] of KEY_TYPES) {
    const { privateKey } = await jose.generateKeyPair(alg, { ...options, extractable: true });
    const jwk = await jose.exportJWK(privateKey);
    keys.push({ ...jwk, alg, use: 'sig', kid: `${alg.toLowerCase()}-${generation}` });
  }
  return keys;
}

function groupsOf(accountId) {
  return accountId.startsWith('ops-') ? ['ops'] : ['staff'];
}

async function provider(issuer, keys) {
  const machineClients = Object.keys(CLIENTS).map((id) => ({
    client_id: id,
    client_secret: `secret-${id}`,
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
  }));
  const made = new Provider(issuer, {
    jwks: { keys },
    clients: [
      ...machineClients,
      {
        client_id: 'gateway-web',
        client_secret: 'secret-gateway-web',
        grant_types: ['authorization_code'],
        response_types: ['code'],
        redirect_uris: [redirectUri],
        id_token_signed_response_alg: 'ES256',
      },
    ],
    claims: { openid: ['sub'], groups: ['groups'] },
    scopes: ['openid', 'groups'],
    findAccount: (ctx, id) => ({ accountId: id, claims: () => ({ sub: id, groups: groupsOf(id) }) }),
    pkce: { required: () => true },
    // The groups go in the ID token too, as identity providers are usually set up to do for sign-in.
    conformIdTokenClaims: false,
    features: {
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => AUDIENCE,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, resource, client) => {
          // Any resource is served, so that tests can get a token meant for another service.
          const alg = CLIENTS[client.clientId]?.alg ?? 'RS256';
          return { scope: 'mcp', audience: resource, accessTokenFormat: 'jwt', jwt: { sign: { alg } } };
        },
      },
    },
    extraTokenClaims: (ctx, token) => {
      const client = CLIENTS[token.clientId];
      return client ? { groups: client.groups } : {};
    },
    ttl: { ClientCredentials: 600, AccessToken: 600, IdToken: 600 },
  });
  made.proxy = false;
  return made;
}

const server = http.createServer();
server.listen(0, '127.0.0.1', async () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  let keys = await signingKeys();
  let current = await provider(issuer, keys);
  server.on('request', async (req, res) => {
    const url = new URL(req.url, issuer);
    if (req.method === 'POST' && url.pathname === '/_control/rotate') {
      keys = await signingKeys();
      current = await provider(issuer, keys);
      res.end('rotated');
    } else if (req.method === 'POST' && url.pathname === '/_control/redirect') {
      redirectUri = url.searchParams.get('uri');
      current = await provider(issuer, keys);
      res.end('redirect set');
    } else if (req.method === 'POST' && (req.url === '/_control/break' || req.url === '/_control/mend')) {
      broken = req.url === '/_control/break';
      res.end(broken ? 'broken' : 'mended');
    } else if (broken && req.url === '/jwks') {
      res.statusCode = 500;
      res.end('the key store is unavailable');
    } else {
      current.callback()(req, res);
    }
  });
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});
