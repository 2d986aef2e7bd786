import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { buildMessages } from './context.ts';
import { apiParts, PartsLog, replyMessages } from './parts.ts';

const quoteCall = { id: 'call_1', name: 'get_quote', arguments: '{"symbol":"AAPL"}' };
const statusCall = { id: 'call_2', name: 'get_market_status', arguments: '' };

describe('a reply as parts (DESIGN §11)', () => {
  test('DESIGN §11: text, tool calls and results are stored in the order they happened; a text-only reply stores no parts', () => {
    const plain = new PartsLog();
    plain.addText('Hello');
    plain.addText(' world');
    assert.equal(plain.stored(), null);
    assert.equal(plain.text, 'Hello world');
    assert.equal(plain.deltas, 2);

    const log = new PartsLog();
    log.addText('Let me look. ');
    log.addCall(quoteCall);
    log.addCall(statusCall);
    log.addResult(quoteCall, { ok: true, result: { symbol: 'AAPL', price: 232.8 } });
    log.addResult(statusCall, { ok: false, error: { code: 'MARKET_DATA_UNAVAILABLE', message: 'down' } });
    log.addText('AAPL is ');
    log.addText('232.80.');
    const stored = JSON.parse(log.stored() ?? 'null') as unknown;
    assert.deepEqual(stored, [
      { type: 'text', text: 'Let me look. ' },
      { type: 'tool_call', id: 'call_1', name: 'get_quote', arguments: '{"symbol":"AAPL"}' },
      { type: 'tool_call', id: 'call_2', name: 'get_market_status', arguments: '' },
      { type: 'tool_result', id: 'call_1', name: 'get_quote', ok: true, result: { symbol: 'AAPL', price: 232.8 } },
      { type: 'tool_result', id: 'call_2', name: 'get_market_status', ok: false, error: { code: 'MARKET_DATA_UNAVAILABLE', message: 'down' } },
      { type: 'text', text: 'AAPL is 232.80.' },
    ]);
    assert.equal(log.text, 'Let me look. AAPL is 232.80.');
    // The API shows parsed arguments ({} where the model sent none).
    assert.deepEqual(apiParts(stored, log.text).slice(1, 3), [
      { type: 'tool_call', id: 'call_1', name: 'get_quote', arguments: { symbol: 'AAPL' } },
      { type: 'tool_call', id: 'call_2', name: 'get_market_status', arguments: {} },
    ]);
  });

  test('DESIGN §11: a stored reply goes back to the provider as assistant calls followed by their results; a call without its result is left out', () => {
    const log = new PartsLog();
    log.addText('Checking. ');
    log.addCall({ ...quoteCall, signature: 'sig-1' });
    log.addResult(quoteCall, { ok: true, result: { price: 1 } });
    log.addText('Now the market: ');
    log.addCall(statusCall); // stopped while it ran: no result
    const messages = replyMessages(JSON.parse(log.stored() ?? 'null'), log.text);
    assert.deepEqual(messages, [
      { role: 'assistant', text: 'Checking. ', toolCalls: [{ ...quoteCall, signature: 'sig-1' }] },
      { role: 'tool', text: '', toolResults: [{ id: 'call_1', name: 'get_quote', content: '{"price":1}', isError: false }] },
      { role: 'assistant', text: 'Now the market: ' },
    ]);
  });

  test('DESIGN §7/§11: history keeps alternation: a reply with tools sits between its question and the next one', () => {
    const log = new PartsLog();
    log.addCall(quoteCall);
    log.addResult(quoteCall, { ok: false, error: { code: 'UNKNOWN_SYMBOL', message: 'no such symbol' } });
    log.addText('No such symbol.');
    const history = [
      { role: 'user' as const, content: 'Quote ZZZZ', images: 0, parts: null },
      { role: 'assistant' as const, content: log.text, images: 0, parts: JSON.parse(log.stored() ?? 'null') as unknown },
    ];
    const messages = buildMessages(history, 'And AAPL?', []);
    assert.deepEqual(
      messages.map((m) => [m.role, m.text, m.toolCalls?.length ?? 0, m.toolResults?.length ?? 0]),
      [
        ['user', 'Quote ZZZZ', 0, 0],
        ['assistant', '', 1, 0],
        ['tool', '', 0, 1],
        ['assistant', 'No such symbol.', 0, 0],
        ['user', 'And AAPL?', 0, 0],
      ],
    );
    assert.deepEqual(messages[2]?.toolResults?.[0], {
      id: 'call_1',
      name: 'get_quote',
      content: '{"error":{"code":"UNKNOWN_SYMBOL","message":"no such symbol"}}',
      isError: true,
    });
  });
});
