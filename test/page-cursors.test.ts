import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createVault, parseKeyring } from '../src/platform/aes-vault.ts';
import type { Vault } from '../src/platform/vault.ts';
import { grantCredits, ledgerPage } from '../src/features/billing/wallet-service.ts';
import { message, send, startOf, userWithOpenAiKey, appOnOpenAiFake } from './kits/conversations.ts';
import type { OpenAiCompatibleFake } from './fakes/index.ts';
import { TEST_ENCRYPTION_KEYS, codeOf, type TestApp } from './helpers/app.ts';

type Page = { nextCursor: string | null };

/** Issue 14 item 11: page cursors are made with a key of their own, never with the provider-key vault key. */
describe('page cursors', () => {
  let fake: OpenAiCompatibleFake;
  let t: TestApp;
  let close: () => Promise<void>;
  before(async () => ({ t, fake, close } = await appOnOpenAiFake()));
  after(() => close());

  /** A user with 3 conversations (the first with 3 turns) and 3 ledger entries. */
  async function userWithPages(): Promise<{ user: string; conversationId: string }> {
    const user = await userWithOpenAiKey(t, fake.validKey, 'cursor');
    let conversationId: string | null = null;
    for (let i = 0; i < 3; i++) {
      const res = await send(t, user, conversationId, message(`turn ${i}`));
      assert.equal(res.statusCode, 200, res.body);
      conversationId = String(startOf(res)['conversationId']);
    }
    for (let i = 0; i < 2; i++) assert.equal((await send(t, user, null, message(`other ${i}`))).statusCode, 200);
    for (let i = 0; i < 3; i++) await grantCredits(t.deps, user, 5, 'test');
    return { user, conversationId: conversationId ?? '' };
  }

  const firstCursors = async (app: TestApp, user: string, conversationId: string) => {
    const page = async (url: string) => {
      const res = await app.call('GET', url, { user });
      assert.equal(res.statusCode, 200, res.body);
      const cursor = res.json<Page>().nextCursor;
      assert.ok(cursor, url);
      return cursor;
    };
    return {
      conversations: await page('/api/advisor/conversations?limit=1'),
      messages: await page(`/api/advisor/conversations/${conversationId}?limit=1`),
      ledger: await page('/api/billing/ledger?limit=1'),
    };
  };

  test('issue 14 item 11: making and reading page cursors never uses the vault’s sealing key (no seal, no open)', async () => {
    const { user, conversationId } = await userWithPages();
    const vault = t.deps.vault as { -readonly [K in keyof Vault]: Vault[K] };
    const { seal, open } = vault;
    let uses = 0;
    vault.seal = (...args) => (uses++, seal(...args));
    vault.open = (...args) => (uses++, open(...args));
    try {
      const cursors = await firstCursors(t, user, conversationId);
      for (const url of [
        `/api/advisor/conversations?limit=1&cursor=${encodeURIComponent(cursors.conversations)}`,
        `/api/advisor/conversations/${conversationId}?limit=1&cursor=${encodeURIComponent(cursors.messages)}`,
        `/api/billing/ledger?limit=1&cursor=${encodeURIComponent(cursors.ledger)}`,
      ]) {
        assert.equal((await t.call('GET', url, { user })).statusCode, 200, url);
      }
    } finally {
      vault.seal = seal;
      vault.open = open;
    }
    assert.equal(uses, 0);
  });

  test('issue 14 item 11: a cursor is bound to its user and its list: another user’s, another list’s or an edited one → 400 VALIDATION_ERROR', async () => {
    const { user, conversationId } = await userWithPages();
    const other = await userWithPages();
    const cursors = await firstCursors(t, user, conversationId);
    const lists = {
      conversations: '/api/advisor/conversations?cursor=',
      messages: `/api/advisor/conversations/${conversationId}?cursor=`,
      ledger: '/api/billing/ledger?cursor=',
    };
    const refused = async (who: string, url: string) => {
      const res = await t.call('GET', url, { user: who });
      assert.equal(res.statusCode, 400, `${who} ${url}: ${res.body}`);
      assert.equal(codeOf(res), 'VALIDATION_ERROR');
    };
    for (const [list, cursor] of Object.entries(cursors) as [keyof typeof lists, string][]) {
      for (const [elsewhere, url] of Object.entries(lists)) {
        if (elsewhere !== list) await refused(user, `${url}${encodeURIComponent(cursor)}`);
      }
      const otherList = list === 'messages' ? `/api/advisor/conversations/${other.conversationId}?cursor=` : lists[list];
      await refused(other.user, `${otherList}${encodeURIComponent(cursor)}`);
      const [keyId, payload, tag] = cursor.split('.');
      const edited = Buffer.from(JSON.stringify(list === 'ledger' ? [1] : ['x', 1])).toString('base64url');
      for (const bad of [`${keyId}.${edited}.${tag}`, `${keyId}.${payload}`, `${cursor}.x`, `nokey.${payload}.${tag}`]) {
        await refused(user, `${lists[list]}${encodeURIComponent(bad)}`);
      }
    }
  });

  test('issue 14 item 11: cursors follow the keyring: still read after a rotation that keeps their key, refused once it is removed', async () => {
    const { user, conversationId } = await userWithPages();
    const cursors = await firstCursors(t, user, conversationId);
    const newKey = `test2:${Buffer.alloc(32, 9).toString('base64')}`;
    const read = (vault: Vault) =>
      ledgerPage({ ...t.deps, vault }, user, cursors.ledger, 1).then(
        () => 'read',
        (err: unknown) => (err as { code?: string }).code,
      );
    assert.equal(await read(createVault(parseKeyring(`${newKey},${TEST_ENCRYPTION_KEYS}`))), 'read');
    assert.equal(await read(createVault(parseKeyring(newKey))), 'VALIDATION_ERROR');
  });
});
