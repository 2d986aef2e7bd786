import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fmtMoney, fmtNumber, fmtUsd } from './format.ts';
import { chargeWords, nextTurnWords, perCredit, usageWords } from './money.ts';
import { CATALOGUE } from './test-catalogue.ts';
import type { Wallet } from './wallet.ts';

const quota = (limit: number, used: number) => ({ limit, used, remaining: limit - used, resetsAt: '2026-12-01T00:00:00Z' });
const wallet = (credits: number, allowanceUsed: number): Wallet => ({ credits, tier: 'free', allowance: quota(200, allowanceUsed), images: quota(20, 0) });

describe('format', () => {
  it('writes numbers with grouping, and a dash for none', () => {
    assert.equal(fmtNumber(1210), '1,210');
    assert.equal(fmtNumber(2.5, 2), '2.50');
    assert.equal(fmtNumber(null), '—');
    assert.equal(fmtNumber(undefined), '—');
  });

  it('writes dollars to the cent, to four places under a dollar, and says when less than the smallest', () => {
    assert.equal(fmtUsd(12.345), '$12.35');
    assert.equal(fmtUsd(0.0004), '$0.0004');
    assert.equal(fmtUsd(0.5), '$0.50');
    assert.equal(fmtUsd(0.00001), '< $0.0001');
    assert.equal(fmtUsd(0), '$0.00');
    assert.equal(fmtUsd(null), '—');
  });

  it('writes minor units as money in their currency', () => {
    assert.equal(fmtMoney(500, 'usd'), '$5.00');
    assert.equal(fmtMoney(1999, 'eur'), '€19.99');
  });
});

describe('usageWords', () => {
  it('says the tokens and the estimated cost on the trader’s key', () => {
    assert.equal(
      usageWords({ inputTokens: 1200, outputTokens: 300, cachedInputTokens: null, reasoningTokens: null, estimatedCostUsd: 0.0004 }),
      '1,200 tokens in · 300 out · ≈ $0.0004 on your key',
    );
  });

  it('drops the ≈ before a "less than" and leaves out what the provider did not report', () => {
    assert.equal(
      usageWords({ inputTokens: 10, outputTokens: 1, cachedInputTokens: null, reasoningTokens: null, estimatedCostUsd: 0.00001 }),
      '10 tokens in · 1 out · < $0.0001 on your key',
    );
    assert.equal(usageWords({ inputTokens: null, outputTokens: null, cachedInputTokens: null, reasoningTokens: null, estimatedCostUsd: null }), '');
  });
});

describe('chargeWords', () => {
  it('says what a turn was charged', () => {
    assert.equal(chargeWords({ source: 'allowance', credits: 0 }), '1 free turn');
    assert.equal(chargeWords({ source: 'credits', credits: 5 }), '5 credits');
    assert.equal(chargeWords({ source: 'credits', credits: 1 }), '1 credit');
    assert.equal(chargeWords({ source: 'free', credits: 0 }), 'free');
    assert.equal(chargeWords({ source: 'credits', credits: 0, status: 'returned' }), 'not charged (nothing was produced)');
  });
});

describe('nextTurnWords', () => {
  it('says what the next turn costs against what the trader has', () => {
    assert.equal(nextTurnWords(CATALOGUE, wallet(40, 18), 'openai', 'gpt-4o-mini'), 'Free turn · 182 left');
    assert.equal(nextTurnWords(CATALOGUE, wallet(40, 200), 'openai', 'gpt-4o-mini'), 'Free turns used up · 1 credit a turn');
    assert.equal(nextTurnWords(CATALOGUE, wallet(1040, 0), 'openai', 'gpt-4o'), '5 credits a turn · you have 1,040');
    assert.equal(nextTurnWords(CATALOGUE, undefined, 'anthropic', 'claude-3-5-sonnet'), '3 credits a turn');
    assert.equal(nextTurnWords(CATALOGUE, undefined, 'openai', 'gpt-4o-mini'), 'Free turn');
    assert.equal(nextTurnWords(CATALOGUE, undefined, 'openai', 'gpt-4'), 'Not offered here');
    assert.equal(nextTurnWords(undefined, undefined, 'openai', 'gpt-4o'), '');
  });
});

describe('perCredit', () => {
  it('divides a pack’s price by its credits', () => {
    assert.equal(perCredit(500, 100, 'usd'), '$0.05 per credit');
    assert.equal(perCredit(4000, 1000, 'usd'), '$0.04 per credit');
    assert.equal(perCredit(1500, 500, 'usd'), '$0.03 per credit');
    assert.equal(perCredit(999, 1000, 'usd'), '$0.01 per credit', 'four places at most, trailing zeros dropped');
  });
});
