import { SignJWT, createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTPayload, type JWTVerifyOptions } from 'jose';
import type { Clock } from '../platform/clock.ts';
import { AppError } from './errors.ts';

interface AuthUser {
  readonly id: string;
  /** Tier asserted by the token, if any (applied to the stored user). */
  readonly tierClaim: string | undefined;
}

export interface Authenticator {
  /** Verifies a bearer token; throws AppError UNAUTHENTICATED. */
  verify(token: string): Promise<AuthUser>;
  /**
   * Local sign-in (DESIGN §2, the web client): a token for any user id, signed with the local secret.
   * Present only on the embedded default listening on loopback (`config.localSignIn`).
   */
  readonly signInLocally?: (userId: string) => Promise<{ token: string; expiresAt: string }>;
}

export interface AuthSettings {
  readonly jwtSecret: string;
  readonly jwksUrl?: string | undefined;
  readonly issuer?: string | undefined;
  readonly audience?: string | undefined;
  /** The claim that may carry a tier (DESIGN §2); undefined = tokens never set the tier. */
  readonly tierClaim?: string | undefined;
  /** Offer `signInLocally` (HS256 only). */
  readonly localSignIn?: boolean;
}

/** A local sign-in lasts a working day; the page asks again after it. */
const LOCAL_SIGN_IN_TTL_SECONDS = 12 * 3600;

const SUB_MAX = 128;
const VERIFIED_MAX = 10_000;
const VERIFIED_TTL_MS = 60_000;

export function createAuthenticator(settings: AuthSettings, clock: Clock): Authenticator {
  const options = (): JWTVerifyOptions => ({
    requiredClaims: ['exp', 'sub'],
    currentDate: clock.now(),
    ...(settings.issuer ? { issuer: settings.issuer } : {}),
    ...(settings.audience ? { audience: settings.audience } : {}),
  });
  const verifyToken: (token: string) => Promise<JWTPayload> = settings.jwksUrl
    ? (() => {
        const jwks = createRemoteJWKSet(new URL(settings.jwksUrl));
        return async (token: string) => (await jwtVerify(token, jwks, options())).payload;
      })()
    : (() => {
        const secret = new TextEncoder().encode(settings.jwtSecret);
        return async (token: string) => (await jwtVerify(token, secret, { ...options(), algorithms: ['HS256'] })).payload;
      })();

  // A verified token is remembered until it expires (at most a minute, so a rotated JWKS key or a
  // changed secret is noticed quickly): signature checks are the largest fixed cost of a request.
  const verified = new Map<string, { user: AuthUser; untilMs: number }>();
  const signInLocally =
    settings.localSignIn === true && !settings.jwksUrl
      ? async (userId: string) => {
          // Whole seconds, as the token's iat and exp are.
          const now = new Date(Math.floor(clock.now().getTime() / 1000) * 1000);
          const token = await mintToken(settings.jwtSecret, userId, { ttlSeconds: LOCAL_SIGN_IN_TTL_SECONDS, now });
          return { token, expiresAt: new Date(now.getTime() + LOCAL_SIGN_IN_TTL_SECONDS * 1000).toISOString() };
        }
      : undefined;
  return {
    ...(signInLocally ? { signInLocally } : {}),
    async verify(token) {
      const nowMs = clock.now().getTime();
      const hit = verified.get(token);
      if (hit && hit.untilMs > nowMs) return hit.user;
      if (hit) verified.delete(token);
      let payload: JWTPayload;
      try {
        payload = await verifyToken(token);
      } catch (err) {
        const reason = err instanceof joseErrors.JWTExpired ? 'token expired' : 'invalid token';
        throw new AppError('UNAUTHENTICATED', reason);
      }
      const sub = payload.sub;
      if (!storableSubject(sub)) throw new AppError('UNAUTHENTICATED', 'token subject must be 1 to 128 characters of text');
      const claimed = settings.tierClaim === undefined ? undefined : payload[settings.tierClaim];
      const tier = typeof claimed === 'string' ? claimed : undefined;
      const user: AuthUser = { id: sub, tierClaim: tier };
      if (verified.size >= VERIFIED_MAX) verified.clear();
      verified.set(token, { user, untilMs: Math.min((payload.exp ?? 0) * 1000, nowMs + VERIFIED_TTL_MS) });
      return user;
    },
  };
}

/**
 * The subject becomes the user id, a text column: 1–128 characters that PostgreSQL can store as they
 * are (no NUL; no lone surrogate, which UTF-8 would turn into U+FFFD and so merge distinct subjects).
 */
function storableSubject(sub: unknown): sub is string {
  return typeof sub === 'string' && sub.length >= 1 && sub.length <= SUB_MAX && !sub.includes('\u0000') && sub.isWellFormed();
}

/** Mints an HS256 token (local use and tests). */
export async function mintToken(
  secret: string,
  userId: string,
  opts: { ttlSeconds?: number; tier?: string; now?: Date; issuer?: string; audience?: string } = {},
): Promise<string> {
  const now = Math.floor((opts.now ?? new Date()).getTime() / 1000);
  let jwt = new SignJWT(opts.tier ? { tier: opts.tier } : {})
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(userId)
    .setIssuedAt(now)
    .setExpirationTime(now + (opts.ttlSeconds ?? 3600));
  if (opts.issuer) jwt = jwt.setIssuer(opts.issuer);
  if (opts.audience) jwt = jwt.setAudience(opts.audience);
  return jwt.sign(new TextEncoder().encode(secret));
}

export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^Bearer ([A-Za-z0-9\-_]+\.[A-Za-z0-9\-_]+\.[A-Za-z0-9\-_]*)$/.exec(header.trim());
  return match?.[1];
}

/**
 * Why a request holds no usable bearer token, as its 401 says: none given, another scheme, or a token
 * that is not a JWT (told the same as one whose signature fails: invalid).
 */
export function missingTokenReason(header: string | undefined): string {
  const value = header?.trim() ?? '';
  if (value === '') return 'a bearer token is required';
  if (!/^bearer\s/i.test(value)) return 'the Authorization header must be `Bearer <token>`';
  return 'invalid token';
}

/** The credential of an `Authorization: Bearer <secret>` header, whatever its format (an opaque token). */
export function bearerSecret(header: string | undefined): string | undefined {
  const match = /^Bearer ([\x21-\x7e]+)$/.exec(header?.trim() ?? '');
  return match?.[1];
}
