// DESIGN §17 in the web client, outside the Journal page: the Accounts page (the focus comes back to an
// account's Edit after its form closes — saved, cancelled or Escape; deleting says how many trades go with
// the account; nothing shifts while the page loads) and the advisor's get_round_trips and get_journal_report
// cards (an ES future's round trip at ×50 with its R, a report's groups and totals, a what-if), with
// list_trades' prices never rounded. Exact text; both sizes, light and dark, axe, no sideways scroll.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import type { Locator, Page } from 'playwright-core';
import { ARTEFACTS, axeViolations, replyDone, screenshot, settlesTo, sidewaysOverflow, startBed, withOpenAiKey, type Bed } from './harness.ts';

let bed: Bed;
before(async () => {
  bed = await startBed();
});
after(async () => {
  await bed.close();
});

const utcDay = (n: number) => new Date(Date.now() + n * 86_400_000).toISOString().slice(0, 10);
const D1 = utcDay(-3);
const D2 = utcDay(-2);

/**
 * One ES contract bought 5000 and sold 5008.25 with a stop at 4995 (a future at ×50: +412.5, risk 250,
 * 1.65R); 1,000 PENNY bought 0.0012 and sold 0.0019 (+0.7, no stop); 10 AAPL bought 100 and sold 95 with a
 * fee of 1 each way and a stop at 98 (−52, risk 20, −2.6R).
 */
const CSV = [
  'symbol,side,quantity,price,fee,executedAt,externalId,note,tags,assetClass,multiplier,stopPrice',
  `ESM6,buy,1,5000,0,${D1}T14:30:00Z,es-1,,,future,,4995`,
  `ESM6,sell,1,5008.25,0,${D1}T15:00:00Z,es-2,,,future,,`,
  `PENNY,buy,1000,0.0012,0,${D2}T14:00:00Z,p-1,,scalp,stock,,`,
  `PENNY,sell,1000,0.0019,0,${D2}T14:05:00Z,p-2,,scalp,stock,,`,
  `AAPL,buy,10,100,1,${D2}T15:00:00Z,a-1,,revenge,stock,,98`,
  `AAPL,sell,10,95,1,${D2}T16:00:00Z,a-2,,revenge,stock,,`,
].join('\n');

async function createAccount(token: string, name: string): Promise<string> {
  const res = await bed.api(token, 'POST', '/api/accounts', { name, currency: 'USD', timezone: 'Etc/UTC', startingBalance: '10000' });
  assert.equal(res.status, 201);
  return ((await res.json()) as { id: string }).id;
}

async function importCsv(token: string, accountId: string, csv: string): Promise<void> {
  const res = await fetch(`${bed.origin}/api/accounts/${accountId}/trades/import`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'text/csv' },
    body: csv,
  });
  assert.equal(res.status, 200, await res.text());
}

/** Each row's header and cells, as shown. */
async function rowTexts(rows: Locator): Promise<string[][]> {
  const out: string[][] = [];
  for (let i = 0; i < (await rows.count()); i++) out.push((await rows.nth(i).locator('th, td').allInnerTexts()).map((t) => t.trim()));
  return out;
}

/** What has the focus: its accessible name as the page writes it (label or text). */
const focused = (page: Page) =>
  page.evaluate<string>(
    "(el => el ? (el.getAttribute('aria-label') ?? el.textContent ?? '').replace(/\\s+/g, ' ').trim() + '|' + el.tagName.toLowerCase() : '')(document.activeElement)",
  );

/** Layout shifts from the page's first paint (those right after an input excluded, as CLS counts them). */
async function watchShifts(page: Page): Promise<void> {
  // A string: the test's own TypeScript has no DOM types (the harness evaluates strings too).
  await page.addInitScript(
    "window.__shifts = 0; new PerformanceObserver((list) => { for (const e of list.getEntries()) if (!e.hadRecentInput) window.__shifts += e.value; }).observe({ type: 'layout-shift', buffered: true });",
  );
}
const shifts = (page: Page) => page.evaluate<number>('window.__shifts');

describe('accounts page', () => {
  test('focus returns to the Edit it came from (save, Cancel, Escape); delete names the trades it takes; CLS ≤ 0.05 while it loads', async () => {
    const { page, token, context } = await bed.signedIn('accounts-17');
    const swing = await createAccount(token, 'Swing');
    await createAccount(token, 'Empty');
    await importCsv(token, swing, CSV);
    await watchShifts(page);

    const figures: string[] = [];
    for (const [size, width, height] of [
      ['desktop', 1280, 800],
      ['phone', 390, 844],
    ] as const) {
      await page.setViewportSize({ width, height });
      await page.goto('/accounts');
      await page.getByRole('button', { name: 'Edit Swing' }).waitFor();
      await page.getByRole('form', { name: 'New account' }).waitFor();
      await page.waitForTimeout(500);
      const cls = await shifts(page);
      figures.push(`${size} ${cls.toFixed(4)}`);
      assert.ok(cls <= 0.05, `Accounts CLS ${cls} at ${width} px`);
    }
    console.log(`Accounts page CLS: ${figures.join(', ')}`);
    await page.setViewportSize({ width: 1280, height: 800 });

    // Escape: the form closes, the focus is back on its Edit.
    await page.getByRole('button', { name: 'Edit Swing' }).click();
    const edit = page.getByRole('form', { name: 'Edit Swing' });
    await settlesTo(page, () => focused(page), '|input', 'the edit opens on its name');
    assert.equal(await page.evaluate<boolean>(`document.activeElement === document.querySelector('form[aria-label="Edit Swing"] input')`), true);
    await edit.getByLabel('Currency').focus();
    await page.keyboard.press('Escape');
    await edit.waitFor({ state: 'detached' });
    // The page gives the focus back in an effect after the render that detached the form: waited for.
    await settlesTo(page, () => focused(page), 'Edit Swing|button', 'Escape gives the focus back to the Edit');

    // Cancel: the same.
    await page.keyboard.press('Enter');
    await edit.getByRole('button', { name: 'Cancel' }).click();
    await edit.waitFor({ state: 'detached' });
    await settlesTo(page, () => focused(page), 'Edit Swing|button', 'Cancel gives the focus back to the Edit');

    // Saved: the row shows the change, the focus is on the renamed account's Edit.
    await page.getByRole('button', { name: 'Edit Swing' }).click();
    await edit.getByLabel('Name', { exact: true }).fill('Swing trades');
    await edit.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('button', { name: 'Edit Swing trades' }).waitFor();
    await settlesTo(page, () => focused(page), 'Edit Swing trades|button', 'a save gives the focus to the renamed account’s Edit');

    // Delete asks with the number of trades that go with the account; dismissed, nothing is deleted.
    const asked: string[] = [];
    page.once('dialog', (d) => {
      asked.push(d.message());
      void d.dismiss();
    });
    await page.getByRole('button', { name: 'Delete Swing trades' }).click();
    await page.waitForTimeout(300);
    assert.deepEqual(asked, ['Delete the account “Swing trades”? Its 6 trades will be deleted with it.']);
    await page.getByRole('button', { name: 'Edit Swing trades' }).waitFor();
    page.once('dialog', (d) => {
      asked.push(d.message());
      void d.accept();
    });
    await page.getByRole('button', { name: 'Delete Empty' }).click();
    await page.getByRole('button', { name: 'Edit Empty' }).waitFor({ state: 'detached' });
    assert.equal(asked[1], 'Delete the account “Empty”? It has no trades.');

    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      for (const [size, width, height] of [
        ['desktop', 1280, 800],
        ['phone', 390, 844],
      ] as const) {
        await page.setViewportSize({ width, height });
        await page.getByRole('button', { name: 'Edit Swing trades' }).click();
        await page.waitForTimeout(150);
        assert.equal(await sidewaysOverflow(page), 0, `${size} ${scheme}`);
        await screenshot(page, `accounts-17-${size}-${scheme}`);
        assert.deepEqual(await axeViolations(page), [], `${size} ${scheme}`);
        await page.keyboard.press('Escape');
        await page.getByRole('form', { name: 'Edit Swing trades' }).waitFor({ state: 'detached' });
      }
    }
    await context.close();
  });
});

describe('advisor cards', () => {
  test('get_round_trips (ESM6 · future ×50: +$412.50, +1.65R), get_journal_report by symbol and its what-if, list_trades at 0.0012', async () => {
    const { page, token, context } = await bed.signedIn('cards-17');
    await withOpenAiKey(bed, token);
    const accountId = await createAccount(token, 'Futures');
    await importCsv(token, accountId, CSV);
    const range = { account: 'Futures', from: utcDay(-29), to: utcDay(0) };
    bed.openai.enqueueStream({
      toolCalls: [
        { name: 'get_round_trips', arguments: range },
        { name: 'get_journal_report', arguments: { ...range, by: 'symbol' } },
        { name: 'get_journal_report', arguments: { ...range, by: 'tag', exclude: ['tag:revenge'] } },
        { name: 'list_trades', arguments: { ...range, symbol: 'PENNY' } },
      ],
    });
    bed.openai.enqueueStream({ chunks: ['ES paid; the revenge trade did not.'] });
    await page.getByLabel('Message', { exact: true }).fill('Where do I make money?');
    await page.keyboard.press('Enter');
    await replyDone(page);

    const trips = page.locator('[data-tool=get_round_trips]');
    await trips.getByText('3 round trips, newest close first').waitFor();
    const rows = trips.getByRole('region', { name: 'Round trips of Futures the advisor read' }).locator('tbody tr');
    const day = (d: string) => new Intl.DateTimeFormat('en-US', { dateStyle: 'medium', timeZone: 'UTC' }).format(Date.parse(`${d}T00:00:00Z`));
    const trips3 = await rowTexts(rows);
    assert.deepEqual(trips3[0], ['AAPL', 'Long', '-$52.00', '-2.6R', '$100.00 → $95.00', '10', '1h', day(D2), 'revenge']);
    assert.deepEqual(trips3[1], ['PENNY', 'Long', '+$0.70', '—', '$0.0012 → $0.0019', '1,000', '5m', day(D2), 'scalp']);
    assert.deepEqual(trips3[2], ['ESM6 · future ×50', 'Long', '+$412.50', '+1.65R', '$5,000.00 → $5,008.25', '1', '30m', day(D1), '']);

    const report = page.locator('[data-tool=get_journal_report]').first();
    const reportRows = report.getByRole('region', { name: 'Report of Futures by symbol' }).locator('tbody tr');
    assert.deepEqual(await rowTexts(reportRows), [
      ['AAPL', '-$52.00', '1', '0%', '-$52.00', '-2.6R'],
      ['ESM6', '+$412.50', '1', '100%', '+$412.50', '+1.65R'],
      ['PENNY', '+$0.70', '1', '100%', '+$0.70', '—'],
      ['All', '+$361.20', '3', '66.67%', '+$120.40', '-0.475R'],
    ]);
    const whatIf = page.locator('[data-tool=get_journal_report]').nth(1);
    await whatIf.getByText('What if: without tag:revenge.').waitFor();
    assert.deepEqual(await rowTexts(whatIf.getByRole('region', { name: 'Report of Futures by tag' }).locator('tbody tr')), [
      ['scalp', '+$0.70', '1', '100%', '+$0.70', '—'],
      ['Untagged', '+$412.50', '1', '100%', '+$412.50', '+1.65R'],
      ['All (what-if)', '+$413.20', '2', '100%', '+$206.60', '+1.65R'],
    ]);

    // A price keeps every digit the service wrote: never "≈ $0.00".
    const trades = page.locator('[data-tool=list_trades]');
    assert.deepEqual(await trades.locator('tbody tr td.num').allInnerTexts(), ['1,000', '$0.0019', '$0.00', '1,000', '$0.0012', '$0.00']);

    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      for (const [size, width, height] of [
        ['desktop', 1280, 800],
        ['phone', 390, 844],
      ] as const) {
        await page.setViewportSize({ width, height });
        await page.waitForTimeout(150);
        assert.equal(await sidewaysOverflow(page), 0, `${size} ${scheme}`);
        for (const [name, card] of [
          ['round-trips', trips],
          ['report', report],
          ['what-if', whatIf],
        ] as const)
          await card.screenshot({ path: path.join(ARTEFACTS, `cards-17-${name}-${size}-${scheme}.png`) });
        assert.deepEqual(await axeViolations(page), [], `${size} ${scheme}`);
      }
    }
    await context.close();
  });
});
