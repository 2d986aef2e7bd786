import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { capResult, MAX_RESULT_BYTES } from './cap.ts';

describe('tool results are capped (DESIGN §11: 16 KB of JSON)', () => {
  const bars = Array.from({ length: 500 }, (_, i) => ({
    t: new Date(Date.UTC(2026, 0, 1) + i * 60_000).toISOString(),
    open: i,
    high: i,
    low: i,
    close: i,
    volume: i,
  }));

  test('DESIGN §11: price bars over 16 KB keep the most recent ones, with truncated: true', () => {
    const capped = capResult('get_price_history', { symbol: 'AAPL', interval: '1min', bars, truncated: false });
    const kept = capped['bars'] as typeof bars;
    assert.ok(Buffer.byteLength(JSON.stringify(capped)) <= MAX_RESULT_BYTES);
    assert.ok(kept.length > 50 && kept.length < 500, String(kept.length));
    assert.deepEqual(kept.at(-1), bars.at(-1));
    assert.equal(capped['truncated'], true);
    // One more bar would not fit: the cut is as small as it can be.
    const oneMore = { ...capped, bars: bars.slice(500 - kept.length - 1) };
    assert.ok(Buffer.byteLength(JSON.stringify(oneMore)) > MAX_RESULT_BYTES);
  });

  test('DESIGN §11: a result that fits is sent as it is', () => {
    const small = { symbol: 'AAPL', interval: '1day', bars: bars.slice(0, 10), truncated: false };
    assert.equal(capResult('get_price_history', small), small);
  });

  test('DESIGN §11: other lists keep their head', () => {
    const accounts = Array.from({ length: 400 }, (_, i) => ({
      name: `Account ${i}`,
      currency: 'USD',
      timezone: 'America/New_York',
      brokerage: null,
      startingBalance: '1000',
    }));
    const capped = capResult('list_my_accounts', { accounts });
    const kept = capped['accounts'] as typeof accounts;
    assert.deepEqual(kept[0], accounts[0]);
    assert.ok(kept.length < 400 && Buffer.byteLength(JSON.stringify(capped)) <= MAX_RESULT_BYTES);
    assert.equal(capped['truncated'], true);
  });
});
