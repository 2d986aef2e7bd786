import { randomBytes, randomUUID } from 'node:crypto';

export interface Ids {
  uuid(): string;
}

export const randomIds: Ids = { uuid: () => randomUUID() };

/** URL-safe random token, e.g. for request ids and lease tokens. */
export function randomToken(bytes = 12): string {
  return randomBytes(bytes).toString('base64url');
}
