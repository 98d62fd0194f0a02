// oauth-as.mjs - a small OAuth 2.1 authorization server for the tests of
// `acp mcp serve --auth-issuer` (tests/integration/run-mcp-auth.sh). Plain
// Node (node:http, node:crypto), no package. Listens on 127.0.0.1 (port 0
// unless given), prints {"port":N,"issuer":URL} on stdout once listening.
//
//   GET  /.well-known/oauth-authorization-server   RFC 8414 metadata
//   GET  /jwks                  the public keys (RSA "rsa1", EC "ec1")
//   POST /register              dynamic client registration (RFC 7591)
//   GET  /authorize             auto-approves: 302 to redirect_uri with
//                               code, state and iss (PKCE S256 required)
//   POST /token                 authorization_code (PKCE checked) and
//                               refresh_token grants: a JWT access token
//                               whose aud is the `resource` asked for
//   POST /introspect            RFC 7662, client rs-client:rs-secret (Basic)
//   GET  /mint?...              a token on demand, for the failure cases:
//                               iss, aud, sub, scope, exp (seconds from now,
//                               may be negative), nbf (idem), alg (RS256,
//                               ES256, HS256, none), kid, badsig=1 (signed
//                               by a key not in the JWKS), typ
//   POST /control               JSON {"grant": "a b", "ttl": S}: grant only
//                               these scopes from now on ("" or absent: all
//                               asked); access tokens live S seconds
//                               (absent: 3600)
//   GET  /stats                 {"jwks": fetches, "introspect": calls,
//                               "refresh": refresh_token grants,
//                               "held": /jwks-held requests waiting}
//   GET  /jwks-held             the keys, answered only once POST /release
//                               comes (a slow issuer: the resource server
//                               must serve others meanwhile)
//   POST /release               answers the waiting /jwks-held requests
import crypto from 'node:crypto';
import http from 'node:http';

const port = Number(process.argv[2] || 0);
const rsa = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const ec = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
const evil = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const stats = { jwks: 0, introspect: 0, refresh: 0, held: 0 };
const heldRes = [];
let ttl = 3600; // lifetime of the access tokens /token issues
let grantOnly = null; // Set of scopes, or null: grant what is asked
let issuer = '';
const clients = new Map();
const codes = new Map();
const refresh = new Map();

const b64u = (buf) => Buffer.from(buf).toString('base64url');
const jwkOf = (key, kid, alg) => ({ ...key.publicKey.export({ format: 'jwk' }), kid, alg, use: 'sig' });

function sign({ alg = 'RS256', kid, typ = 'at+jwt', badsig = false, claims }) {
  const header = { alg, typ };
  if (kid !== '') header.kid = kid ?? (alg === 'ES256' ? 'ec1' : 'rsa1');
  const input = `${b64u(JSON.stringify(header))}.${b64u(JSON.stringify(claims))}`;
  let sig = Buffer.alloc(0);
  if (alg === 'RS256') {
    sig = crypto.sign('sha256', Buffer.from(input), (badsig ? evil : rsa).privateKey);
  } else if (alg === 'ES256') {
    sig = crypto.sign('sha256', Buffer.from(input), { key: ec.privateKey, dsaEncoding: 'ieee-p1363' });
  } else if (alg === 'HS256') {
    // The "public key as HMAC secret" confusion.
    const secret = rsa.publicKey.export({ format: 'pem', type: 'spki' });
    sig = crypto.createHmac('sha256', secret).update(input).digest();
  }
  if (badsig && alg === 'ES256') sig[5] ^= 1;
  return `${input}.${b64u(sig)}`;
}

function verify(token) {
  const [h, p, s] = token.split('.');
  if (!s) return null;
  const header = JSON.parse(Buffer.from(h, 'base64url'));
  const key = header.alg === 'ES256' ? ec.publicKey : rsa.publicKey;
  const opts = header.alg === 'ES256' ? { key, dsaEncoding: 'ieee-p1363' } : key;
  if (!['RS256', 'ES256'].includes(header.alg)) return null;
  if (!crypto.verify('sha256', Buffer.from(`${h}.${p}`), opts, Buffer.from(s, 'base64url'))) return null;
  return JSON.parse(Buffer.from(p, 'base64url'));
}

const now = () => Math.floor(Date.now() / 1000);

function accessToken(sub, scope, aud) {
  return sign({ claims: { iss: issuer, sub, aud, scope, iat: now(), nbf: now(), exp: now() + ttl, client_id: 'x', jti: crypto.randomUUID() } });
}

function grant(asked) {
  const want = (asked || '').split(' ').filter(Boolean);
  return (grantOnly ? want.filter((s) => grantOnly.has(s)) : want).join(' ');
}

function send(res, status, body, headers = {}) {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': typeof body === 'string' ? 'text/plain' : 'application/json', ...headers });
  res.end(text);
}

function readBody(req) {
  return new Promise((resolve) => {
    let b = '';
    req.on('data', (c) => { b += c; });
    req.on('end', () => resolve(b));
  });
}

const server = http.createServer(async (req, res) => {
  const u = new URL(req.url, issuer);
  const body = await readBody(req);
  const form = new URLSearchParams(body);
  if (u.pathname === '/.well-known/oauth-authorization-server') {
    return send(res, 200, {
      issuer,
      authorization_endpoint: `${issuer}/authorize`,
      token_endpoint: `${issuer}/token`,
      registration_endpoint: `${issuer}/register`,
      introspection_endpoint: `${issuer}/introspect`,
      jwks_uri: `${issuer}/jwks`,
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none', 'client_secret_basic', 'client_secret_post'],
      authorization_response_iss_parameter_supported: true,
    });
  }
  if (u.pathname === '/jwks') {
    stats.jwks++;
    return send(res, 200, { keys: [jwkOf(rsa, 'rsa1', 'RS256'), jwkOf(ec, 'ec1', 'ES256')] });
  }
  if (u.pathname === '/jwks-held') {
    stats.jwks++;
    stats.held++;
    heldRes.push(res);
    return;
  }
  if (u.pathname === '/release' && req.method === 'POST') {
    const keys = { keys: [jwkOf(rsa, 'rsa1', 'RS256'), jwkOf(ec, 'ec1', 'ES256')] };
    while (heldRes.length) send(heldRes.shift(), 200, keys);
    stats.held = 0;
    return send(res, 200, {});
  }
  if (u.pathname === '/stats') return send(res, 200, stats);
  if (u.pathname === '/control' && req.method === 'POST') {
    const c = JSON.parse(body || '{}');
    grantOnly = c.grant ? new Set(c.grant.split(' ')) : null;
    ttl = c.ttl || 3600;
    return send(res, 200, { ok: true });
  }
  if (u.pathname === '/register' && req.method === 'POST') {
    const meta = JSON.parse(body || '{}');
    const id = `client-${crypto.randomBytes(6).toString('hex')}`;
    clients.set(id, meta);
    return send(res, 201, { ...meta, client_id: id, token_endpoint_auth_method: 'none' });
  }
  if (u.pathname === '/authorize') {
    const q = u.searchParams;
    if (!clients.has(q.get('client_id')) || q.get('code_challenge_method') !== 'S256' || !q.get('code_challenge')) {
      return send(res, 400, { error: 'invalid_request' });
    }
    const code = crypto.randomBytes(16).toString('hex');
    codes.set(code, {
      client: q.get('client_id'), redirect: q.get('redirect_uri'), challenge: q.get('code_challenge'),
      scope: q.get('scope') || '', resource: q.get('resource'),
    });
    const to = new URL(q.get('redirect_uri'));
    to.searchParams.set('code', code);
    if (q.get('state')) to.searchParams.set('state', q.get('state'));
    to.searchParams.set('iss', issuer);
    res.writeHead(302, { location: to.toString() });
    return res.end();
  }
  if (u.pathname === '/token' && req.method === 'POST') {
    const gt = form.get('grant_type');
    if (gt === 'authorization_code') {
      const c = codes.get(form.get('code'));
      codes.delete(form.get('code'));
      const ver = form.get('code_verifier') || '';
      if (!c || c.redirect !== form.get('redirect_uri') ||
          b64u(crypto.createHash('sha256').update(ver).digest()) !== c.challenge) {
        return send(res, 400, { error: 'invalid_grant' });
      }
      const scope = grant(c.scope);
      const rt = crypto.randomBytes(16).toString('hex');
      refresh.set(rt, { scope, resource: c.resource });
      return send(res, 200, { access_token: accessToken('user-1', scope, c.resource), token_type: 'Bearer', expires_in: ttl, scope, refresh_token: rt });
    }
    if (gt === 'refresh_token') {
      const r = refresh.get(form.get('refresh_token'));
      if (!r) return send(res, 400, { error: 'invalid_grant' });
      stats.refresh++;
      return send(res, 200, { access_token: accessToken('user-1', r.scope, r.resource), token_type: 'Bearer', expires_in: ttl, scope: r.scope });
    }
    return send(res, 400, { error: 'unsupported_grant_type' });
  }
  if (u.pathname === '/introspect' && req.method === 'POST') {
    stats.introspect++;
    const auth = req.headers.authorization || '';
    if (auth !== `Basic ${Buffer.from('rs-client:rs-secret').toString('base64')}`) {
      return send(res, 401, { error: 'invalid_client' });
    }
    let claims = null;
    try { claims = verify(form.get('token') || ''); } catch { claims = null; }
    if (!claims || claims.iss !== issuer || (claims.exp && claims.exp <= now())) return send(res, 200, { active: false });
    return send(res, 200, { active: true, ...claims, token_type: 'Bearer' });
  }
  if (u.pathname === '/mint') {
    const q = u.searchParams;
    const claims = {
      iss: q.get('iss') ?? issuer,
      sub: q.get('sub') ?? 'user-1',
      aud: q.get('aud'),
      scope: q.get('scope') ?? '',
      iat: now(),
      exp: now() + Number(q.get('exp') ?? 3600),
    };
    if (q.has('nbf')) claims.nbf = now() + Number(q.get('nbf'));
    return send(res, 200, sign({
      alg: q.get('alg') || 'RS256', kid: q.get('kid') ?? undefined, typ: q.get('typ') || 'at+jwt',
      badsig: q.get('badsig') === '1', claims,
    }));
  }
  return send(res, 404, { error: 'not_found' });
});

server.listen(port, '127.0.0.1', () => {
  issuer = `http://127.0.0.1:${server.address().port}`;
  process.stdout.write(`${JSON.stringify({ port: server.address().port, issuer })}\n`);
});
process.on('SIGTERM', () => { server.close(); process.exit(0); });
