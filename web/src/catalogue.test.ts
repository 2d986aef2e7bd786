import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Schemas } from './api/client.ts';
import { costWords, modelChoices, modelEntry, providerName } from './catalogue.ts';
import { CATALOGUE } from './test-catalogue.ts';

type Key = Schemas['ProviderKeyListItem'];
const key = (provider: Key['provider'], defaultModel: string, active = true) => ({ provider, defaultModel, active }) as Key;

describe('modelEntry', () => {
  it('finds a model by its exact name or by a pattern with `*` anywhere, the first entry winning', () => {
    assert.equal(modelEntry(CATALOGUE, 'openai', 'gpt-4o')?.creditsPerTurn, 5);
    assert.equal(modelEntry(CATALOGUE, 'openai', 'gpt-4o-mini')?.allowance, true);
    assert.equal(modelEntry(CATALOGUE, 'openai', 'o3-mini')?.match, 'o*-mini');
    assert.equal(modelEntry(CATALOGUE, 'anthropic', 'claude-3-5-sonnet')?.match, 'claude-*-sonnet');
    assert.equal(modelEntry(CATALOGUE, 'anthropic', 'claude-3-5-haiku')?.match, 'claude-*');
  });

  it('finds nothing for a model no entry of its provider matches', () => {
    assert.equal(modelEntry(CATALOGUE, 'openai', 'gpt-4'), undefined);
    assert.equal(modelEntry(CATALOGUE, 'openai', 'o3'), undefined);
    assert.equal(modelEntry(CATALOGUE, 'google', 'gpt-4o'), undefined);
  });
});

describe('costWords', () => {
  it('says how a turn is paid', () => {
    assert.equal(costWords(CATALOGUE, 'openai', 'gpt-4o-mini'), 'Free allowance turns');
    assert.equal(costWords(CATALOGUE, 'openai', 'gpt-4o'), '5 credits per turn');
    assert.equal(costWords(CATALOGUE, 'anthropic', 'claude-3-7-sonnet'), '3 credits per turn');
    assert.equal(costWords(CATALOGUE, 'openai', 'gpt-4'), 'Not offered here');
    assert.equal(costWords(undefined, 'openai', 'gpt-4o'), '');
  });
});

describe('modelChoices', () => {
  it('lists suggestions, then exact catalogue names, then a default that is neither, per key', () => {
    assert.deepEqual(modelChoices(CATALOGUE, [key('openai', 'gpt-4o'), key('anthropic', 'claude-x', false)]), [
      { provider: 'openai', models: ['gpt-4o-mini', 'gpt-4o'] },
      { provider: 'anthropic', models: ['claude-3-5-sonnet', 'claude-x'] },
    ]);
  });

  it('keeps one order whichever model is the default', () => {
    const orders = ['gpt-4o-mini', 'gpt-4o'].map((m) => modelChoices(CATALOGUE, [key('openai', m)]));
    assert.deepEqual(orders[0], orders[1]);
  });

  it('still lists the key’s default before the catalogue is loaded', () => {
    assert.deepEqual(modelChoices(undefined, [key('openai', 'gpt-4o')]), [{ provider: 'openai', models: ['gpt-4o'] }]);
  });
});

describe('providerName', () => {
  it('names a known provider, and gives an unknown one back as it is', () => {
    assert.equal(providerName('google'), 'Google Gemini');
    assert.equal(providerName('acme'), 'acme');
  });
});
