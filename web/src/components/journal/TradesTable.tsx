// The account's trades (fills), newest first, as the service pages them; each with its note and tags,
// which can be changed (PATCH, nothing else of a fill can), and a delete.
import { useState } from 'preact/hooks';
import { api, must, type Schemas } from '../../api/client.ts';
import { Problem, TableHead, useAction } from '../../ui.tsx';
import { Money, Price, SymbolCell } from './Figures.tsx';
import { day, decimal, timeIn } from './format.ts';
import './journal.css';

export type Trade = Schemas['Trade'];

/** The headers of `TradeCells`' cells, in their order. */
export const TRADE_CELL_COLUMNS = ['Side', { label: 'Quantity', num: true }, { label: 'Price', num: true }, { label: 'Fee', num: true }, 'Note and tags'];

const COLUMNS = ['Trading day', 'Time', 'Symbol', ...TRADE_CELL_COLUMNS, { label: 'Actions', srOnly: true }];

const describe = (t: Trade) => `${t.side} ${t.quantity} ${t.symbol} on ${t.tradingDay}`;

export function TradesTable({ trades, currency, timezone, onChanged }: { trades: Trade[]; currency: string; timezone: string; onChanged: () => void }) {
  const [editing, setEditing] = useState<string | undefined>();
  const row = useAction();
  const remove = (t: Trade) =>
    confirm(`Delete the trade: ${describe(t)}? The journal is recomputed without it.`) &&
    row.run(async () => {
      await must(api.DELETE('/api/accounts/{id}/trades/{tradeId}', { params: { path: { id: t.accountId, tradeId: t.id } } }));
      onChanged();
    });
  return (
    <>
      <Problem error={row.error} />
      <div class="jr-scroll" role="region" aria-label="Trades table" tabIndex={0}>
        <table class="table compact jr-trades">
          <caption class="sr-only">Trades, newest first</caption>
          <TableHead columns={COLUMNS} />
          <tbody>
            {trades.map((t) =>
              editing === t.id ? (
                <tr key={t.id}>
                  <td colSpan={COLUMNS.length}>
                    <EditTrade
                      trade={t}
                      onDone={(changed) => {
                        setEditing(undefined);
                        if (changed) onChanged();
                      }}
                    />
                  </td>
                </tr>
              ) : (
                <tr key={t.id} data-trade={t.id}>
                  <td>{day(t.tradingDay)}</td>
                  <td>{timeIn(t.executedAt, timezone)}</td>
                  <SymbolCell symbol={t.symbol} assetClass={t.assetClass} multiplier={t.multiplier} />
                  <TradeCells trade={t} currency={currency} />
                  <td>
                    <div class="actions">
                      <button type="button" class="secondary small" onClick={() => setEditing(t.id)}>
                        Edit<span class="sr-only"> note and tags of {describe(t)}</span>
                      </button>
                      <button type="button" class="danger small" disabled={row.busy} onClick={() => remove(t)}>
                        Delete<span class="sr-only"> {describe(t)}</span>
                      </button>
                    </div>
                  </td>
                </tr>
              ),
            )}
          </tbody>
        </table>
      </div>
    </>
  );
}

/** A fill's side, quantity, price, fee, and note with its tags: the cells the Journal page's table and the advisor's card share. */
export function TradeCells({ trade: t, currency }: { trade: Pick<Trade, 'side' | 'quantity' | 'price' | 'fee' | 'note' | 'tags'>; currency: string }) {
  return (
    <>
      <td>
        <span class={`jr-side ${t.side}`}>{t.side === 'buy' ? 'Buy' : 'Sell'}</span>
      </td>
      <td class="num">{decimal(t.quantity)}</td>
      <td class="num">
        <Price value={t.price} currency={currency} />
      </td>
      <td class="num">
        <Money value={t.fee} currency={currency} />
      </td>
      <td class="note">
        {t.note ?? ''}
        {t.tags.length > 0 && (
          <ul class="jr-tags" aria-label="Tags">
            {t.tags.map((tag) => (
              <li key={tag}>{tag}</li>
            ))}
          </ul>
        )}
      </td>
    </>
  );
}

/** Tags as typed: comma-separated, trimmed, empty ones dropped. */
const parseTags = (text: string): string[] =>
  text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

function EditTrade({ trade, onDone }: { trade: Trade; onDone: (changed: boolean) => void }) {
  const [note, setNote] = useState(trade.note ?? '');
  const [tags, setTags] = useState(trade.tags.join(', '));
  const action = useAction();
  const id = `edit-${trade.id}`;
  const submit = async (e: Event) => {
    e.preventDefault();
    const done = await action.run(() =>
      must(
        api.PATCH('/api/accounts/{id}/trades/{tradeId}', {
          params: { path: { id: trade.accountId, tradeId: trade.id } },
          body: { note: note.trim() === '' ? null : note, tags: parseTags(tags) },
        }),
      ),
    );
    if (done) onDone(true);
  };
  return (
    <form class="jr-edit" onSubmit={submit} aria-label={`Edit ${describe(trade)}`}>
      <label>
        Note
        <textarea rows={2} maxLength={2000} value={note} onInput={(e) => setNote(e.currentTarget.value)} />
      </label>
      <label>
        Tags
        <input value={tags} onInput={(e) => setTags(e.currentTarget.value)} aria-describedby={`${id}-hint`} />
        <span id={`${id}-hint`} class="hint">
          Comma-separated; at most 10, each up to 32 characters.
        </span>
      </label>
      <Problem error={action.error} />
      <div class="actions">
        <button type="submit" disabled={action.busy}>
          Save
        </button>
        <button type="button" class="secondary" onClick={() => onDone(false)}>
          Cancel
        </button>
      </div>
    </form>
  );
}
