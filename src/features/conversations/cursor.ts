import { invalidCursor, makeCursor, readCursor } from '../../http/cursor.ts';
import type { Vault } from '../../platform/vault.ts';

/** This feature's two paged lists; the cursor format and its key are in src/http/cursor.ts. */
export type CursorKind = 'conversations' | 'messages';

export function sealCursor(vault: Vault, userId: string, kind: CursorKind, payload: readonly (string | number)[]): string {
  return makeCursor(vault, userId, kind, payload);
}

/** The payload of a cursor this service made for this user and list, or 400 VALIDATION_ERROR. */
export function openCursor(vault: Vault, userId: string, kind: CursorKind, cursor: string): unknown[] {
  return readCursor(vault, userId, kind, cursor);
}

export { invalidCursor };
