import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { randomUUID } from 'node:crypto';
import { SignJWT, exportJWK, generateKeyPair, type CryptoKey, type JWTPayload } from 'jose';
import { loadConfig } from '../src/config.ts';
import { mintToken } from '../src/http/auth.ts';
import { TEST_JWT_SECRET, buildTestApp, codeOf, configProblems, type TestApp } from './helpers/app.ts';

const ISSUER = 'https://idp.example.test/';
const AUDIENCE = 'advisor-api';

/** An identity provider on loopback: publishes its public key as a JWKS and signs tokens with it. */
async function startIdentityProvider(): Promise<{ url: string; sign(claims: JWTPayload): Promise<string>; close(): Promise<void> }> {
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  const server: Server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no port');
  return {
    url: `http://127.0.0.1:${address.port}/.well-known/jwks.json`,
    sign: (claims) => signWith(privateKey, claims),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

function signWith(key: CryptoKey, claims: JWTPayload): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ iss: ISSUER, aud: AUDIENCE, iat: now, exp: now + 600, ...claims }).setProtectedHeader({ alg: 'ES256', kid: 'k1', typ: 'JWT' }).sign(key);
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describe('authentication (DESIGN §2)', () => {
  describe('configuration', () => {
    test('DESIGN §2: AUTH_JWKS_URL without AUTH_ISSUER and AUTH_AUDIENCE stops the start with a message naming them', () => {
      const both = configProblems({ AUTH_JWKS_URL: 'https://idp.example.test/jwks.json' });
      assert.ok(
        both.some((p) => p.includes('AUTH_ISSUER') && p.includes('AUTH_AUDIENCE')),
        both.join('; '),
      );
      const noAudience = configProblems({ AUTH_JWKS_URL: 'https://idp.example.test/jwks.json', AUTH_ISSUER: ISSUER });
      assert.ok(
        noAudience.some((p) => p.startsWith('AUTH_AUDIENCE must be set')),
        noAudience.join('; '),
      );
      assert.ok(!noAudience.some((p) => p.includes('AUTH_ISSUER')));
      assert.deepEqual(configProblems({ AUTH_JWKS_URL: 'https://idp.example.test/jwks.json', AUTH_ISSUER: ISSUER, AUTH_AUDIENCE: AUDIENCE }), []);
    });

    test('DESIGN §2: the JWKS URL must be https: (plain http: only for a loopback host)', () => {
      const env = { AUTH_ISSUER: ISSUER, AUTH_AUDIENCE: AUDIENCE };
      for (const url of ['http://idp.example.test/jwks.json', 'http://10.0.0.5/jwks.json', 'ftp://idp.example.test/jwks.json', 'not a url']) {
        const problems = configProblems({ ...env, AUTH_JWKS_URL: url });
        assert.ok(
          problems.some((p) => p.startsWith('AUTH_JWKS_URL must be')),
          `${url}: ${problems.join('; ')}`,
        );
      }
      for (const url of ['https://idp.example.test/jwks.json', 'http://127.0.0.1:8080/jwks', 'http://localhost/jwks', 'http://[::1]:9000/jwks']) {
        assert.deepEqual(configProblems({ ...env, AUTH_JWKS_URL: url }), [], url);
      }
    });

    test('DESIGN §2: AUTH_TIER_CLAIM defaults to "tier" for local HS256 tokens and to none for JWKS tokens', () => {
      assert.equal(loadConfig({}).auth.tierClaim, 'tier');
      assert.equal(loadConfig({ AUTH_TIER_CLAIM: 'none' }).auth.tierClaim, undefined);
      const jwks = { AUTH_JWKS_URL: 'https://idp.example.test/jwks.json', AUTH_ISSUER: ISSUER, AUTH_AUDIENCE: AUDIENCE };
      assert.equal(loadConfig(jwks).auth.tierClaim, undefined);
      assert.equal(loadConfig({ ...jwks, AUTH_TIER_CLAIM: 'https://example.test/tier' }).auth.tierClaim, 'https://example.test/tier');
      assert.ok(configProblems({ AUTH_TIER_CLAIM: 'has space' }).some((p) => p.startsWith('AUTH_TIER_CLAIM')));
    });
  });

  describe('tokens from an identity provider (JWKS)', () => {
    let idp: Awaited<ReturnType<typeof startIdentityProvider>>;
    let t: TestApp;
    before(async () => {
      idp = await startIdentityProvider();
      t = await buildTestApp({ env: { AUTH_JWKS_URL: idp.url, AUTH_ISSUER: ISSUER, AUTH_AUDIENCE: AUDIENCE } });
    });
    after(async () => {
      await t.close();
      await idp.close();
    });

    const tierOf = async (token: string) => {
      const res = await t.call('GET', '/api/billing/wallet', { headers: bearer(token) });
      assert.equal(res.statusCode, 200, res.body);
      return res.json<{ tier: string }>().tier;
    };

    test('DESIGN §2: a JWKS token for this issuer and audience is accepted', async () => {
      const res = await t.call('GET', '/api/accounts', { headers: bearer(await idp.sign({ sub: `u-${randomUUID()}` })) });
      assert.equal(res.statusCode, 200, res.body);
    });

    test('DESIGN §2: a JWKS token for another issuer or another audience → 401 UNAUTHENTICATED', async () => {
      const sub = `u-${randomUUID()}`;
      for (const claims of [{ iss: 'https://other-tenant.example.test/' }, { aud: 'someone-elses-app' }, { iss: undefined }, { aud: undefined }]) {
        const res = await t.call('GET', '/api/accounts', { headers: bearer(await idp.sign({ sub, ...claims })) });
        assert.equal(res.statusCode, 401, JSON.stringify(claims));
        assert.equal(codeOf(res), 'UNAUTHENTICATED');
      }
      const hs256 = await mintToken(TEST_JWT_SECRET, sub, { issuer: ISSUER, audience: AUDIENCE });
      const res = await t.call('GET', '/api/accounts', { headers: bearer(hs256) });
      assert.equal(res.statusCode, 401);
      assert.equal(codeOf(res), 'UNAUTHENTICATED');
    });

    test('DESIGN §2: a JWKS token’s tier claim is not honoured unless AUTH_TIER_CLAIM names it', async () => {
      const sub = `u-${randomUUID()}`;
      assert.equal(await tierOf(await idp.sign({ sub, tier: 'pro' })), 'free');
      const named = await buildTestApp({
        shareWith: t,
        env: { AUTH_JWKS_URL: idp.url, AUTH_ISSUER: ISSUER, AUTH_AUDIENCE: AUDIENCE, AUTH_TIER_CLAIM: 'https://advisor.example.test/tier' },
      });
      try {
        const call = async (claims: JWTPayload) => {
          const res = await named.call('GET', '/api/billing/wallet', { headers: bearer(await idp.sign({ sub, ...claims })) });
          assert.equal(res.statusCode, 200, res.body);
          return res.json<{ tier: string }>().tier;
        };
        assert.equal(await call({ tier: 'pro' }), 'free');
        assert.equal(await call({ 'https://advisor.example.test/tier': 'pro' }), 'pro');
      } finally {
        await named.close();
      }
    });

    test('DESIGN §2: a validly signed JWKS token whose sub PostgreSQL cannot store → 401 UNAUTHENTICATED, never 500', async () => {
      for (const sub of ['a\u0000b', '\ud800x', 'x'.repeat(129), '']) {
        const res = await t.call('GET', '/api/accounts', { headers: bearer(await idp.sign({ sub })) });
        assert.equal(res.statusCode, 401, `${JSON.stringify(sub)}: ${res.body}`);
        assert.equal(codeOf(res), 'UNAUTHENTICATED');
      }
    });
  });

  describe('local HS256 tokens', () => {
    let t: TestApp;
    before(async () => {
      t = await buildTestApp();
    });
    after(async () => t.close());

    test('DESIGN §2: the tier claim of a local token sets the stored tier only when it names a catalogue tier', async () => {
      const sub = `u-${randomUUID()}`;
      const wallet = async (tier: string | undefined) => {
        const token = await mintToken(TEST_JWT_SECRET, sub, tier === undefined ? {} : { tier });
        return (await t.call('GET', '/api/billing/wallet', { headers: bearer(token) })).json<{ tier: string }>().tier;
      };
      assert.equal(await wallet('pro'), 'pro');
      assert.equal(await wallet('platinum'), 'pro');
      assert.equal(await wallet(undefined), 'pro');
      assert.equal(await wallet('free'), 'free');
    });

    test('DESIGN §2: with AUTH_TIER_CLAIM=none a local token’s tier claim is ignored', async () => {
      const other = await buildTestApp({ shareWith: t, env: { AUTH_TIER_CLAIM: 'none' } });
      try {
        const token = await mintToken(TEST_JWT_SECRET, `u-${randomUUID()}`, { tier: 'pro' });
        assert.equal((await other.call('GET', '/api/billing/wallet', { headers: bearer(token) })).json<{ tier: string }>().tier, 'free');
      } finally {
        await other.close();
      }
    });

    test('DESIGN §2: a malformed bearer token (Bearer garbage) → 401 UNAUTHENTICATED whose message says the token is invalid, not that one is required', async () => {
      const messageOf = (res: { json: <T>() => T }) => res.json<{ error: { message: string } }>().error.message;
      for (const authorization of ['Bearer garbage', 'Bearer a.b', 'Bearer not a token', 'Bearer eyJ.eyJ.sig']) {
        const res = await t.call('GET', '/api/accounts', { headers: { authorization } });
        assert.equal(res.statusCode, 401, authorization);
        assert.equal(codeOf(res), 'UNAUTHENTICATED');
        assert.match(messageOf(res), /invalid/i, authorization);
        assert.doesNotMatch(messageOf(res), /required/i, authorization);
      }
      const other = await t.call('GET', '/api/accounts', { headers: { authorization: 'Basic dXNlcjpwYXNz' } });
      assert.equal(other.statusCode, 401);
      assert.equal(codeOf(other), 'UNAUTHENTICATED');
      assert.match(messageOf(other), /Bearer/);
      const none = await t.call('GET', '/api/accounts', { user: null });
      assert.equal(none.statusCode, 401);
      assert.equal(codeOf(none), 'UNAUTHENTICATED');
      assert.match(messageOf(none), /required/);
    });

    test('DESIGN §2: a validly signed token whose sub holds \\u0000, a lone surrogate or 129 characters → 401 UNAUTHENTICATED, never 500', async () => {
      for (const sub of ['alice\u0000', '\u0000', 'bob\udc00', 'x'.repeat(129)]) {
        const res = await t.call('GET', '/api/accounts', { headers: bearer(await mintToken(TEST_JWT_SECRET, sub)) });
        assert.equal(res.statusCode, 401, `${JSON.stringify(sub)}: ${res.body}`);
        assert.equal(codeOf(res), 'UNAUTHENTICATED');
      }
      const longest = await mintToken(TEST_JWT_SECRET, 'y'.repeat(128));
      assert.equal((await t.call('GET', '/api/accounts', { headers: bearer(longest) })).statusCode, 200);
    });
  });
});
