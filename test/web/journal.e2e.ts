// Issue 28, the web client: the Journal page of an account in real Chromium against the real service —
// a CSV imported through the file picker and its report, the trades filtered and paged, the totals the
// service computed for a worked example, the daily chart, export as a download, note and tags, delete,
// no sideways scroll on a phone, axe light and dark — and the advisor's get_journal and position_size
// cards in a chat turn scripted through the OpenAI-compatible fake.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { ARTEFACTS, startBed, screenshot, axeViolations, withOpenAiKey, type Bed } from './harness.ts';

let bed: Bed;
before(async () => {
  bed = await startBed();
});
after(async () => {
  await bed.close();
});

/** A UTC calendar day `n` days from today (the accounts here keep Etc/UTC: trading day = UTC date). */
const utcDay = (n: number) => new Date(Date.now() + n * 86_400_000).toISOString().slice(0, 10);
const D1 = utcDay(-3);
/** The `day`th of the month `months` months from this one (UTC): a range around it never straddles two months, whatever today is. */
const monthDay = (months: number, day: number): string => {
  const now = new Date();
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + months, day)).toISOString().slice(0, 10);
};
const D2 = utcDay(-2);

/**
 * The worked example: AAPL bought 10 @ 100 and sold 10 @ 110, fee 1 each (day 1: realized 100, net 98);
 * TSLA bought 2 @ 250 and sold 2 @ 240 (day 2: −20); MSFT 5 @ 200 still open; one row refused (side).
 * Broker spellings on purpose: header case and order, BOT/SLD, an empty fee.
 */
const CSV = [
  'Symbol,Side,Quantity,Price,Fee,ExecutedAt,ExternalId,Note',
  `AAPL,BOT,10,100,1,${D1}T14:30:00Z,ex-1,"Breakout, first try"`,
  `AAPL,SLD,10,110,1,${D1}T15:45:00Z,ex-2,`,
  `TSLA,buy,2,250,0,${D2}T14:00:00Z,ex-3,`,
  `TSLA,sell,2,240,,${D2}T16:00:00Z,ex-4,Stopped out`,
  `MSFT,buy,5,200,0,${D2}T17:00:00Z,ex-5,`,
  `NVDA,hold,1,100,0,${D2}T17:30:00Z,ex-6,`,
].join('\r\n');

function csvFile(name: string, text: string): string {
  const file = path.join(os.tmpdir(), `${process.pid}-${name}`);
  writeFileSync(file, text);
  return file;
}

async function createAccount(token: string, name: string): Promise<string> {
  const res = await bed.api(token, 'POST', '/api/accounts', { name, currency: 'USD', timezone: 'Etc/UTC', startingBalance: '10000' });
  assert.equal(res.status, 201);
  return ((await res.json()) as { id: string }).id;
}

async function importCsv(token: string, accountId: string, csv: string): Promise<unknown> {
  const res = await fetch(`${bed.origin}/api/accounts/${accountId}/trades/import`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'text/csv' },
    body: csv,
  });
  assert.equal(res.status, 200);
  return res.json();
}

/** The page fits the window: nothing makes it scroll sideways (wide tables scroll in their own box). */
const fitsWidth = (page: Page) => page.evaluate<boolean>('document.documentElement.scrollWidth <= window.innerWidth');
/** The elements that reach past the window's right edge (the message of a failed fitsWidth). */
const overflowing = (page: Page) =>
  page.evaluate<string>(
    "[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5 && !e.parentElement?.closest('.jr-scroll')).slice(0, 8).map(e => `${e.tagName.toLowerCase()}.${e.className?.baseVal ?? e.className} ${Math.round(e.getBoundingClientRect().right)}`).join(', ')",
  );
const tradeRows = (page: Page) => page.getByRole('region', { name: 'Trades table', exact: true }).locator('tbody tr');

describe('journal page', () => {
  test('issue 28: import a CSV through the file picker → the report row by row; the trades, totals (the exact figures of the worked example), chart and open positions; filter by symbol; export downloads the CSV; note and tags; delete', async () => {
    const { page, token, context } = await bed.signedIn('journal');
    const accountId = await createAccount(token, 'Swing');
    await page.getByRole('link', { name: 'Accounts' }).click();
    await page.getByRole('link', { name: 'Journal of Swing' }).click();
    await page.waitForURL(`**/accounts/${accountId}/journal`);
    await page.getByRole('heading', { name: 'Journal: Swing' }).waitFor();
    await page.getByText('No trades in this range.', { exact: false }).waitFor();

    // Import through the file picker: the dry run first, then the import.
    await page.getByLabel('CSV file').setInputFiles(csvFile('trades.csv', CSV));
    await page.getByRole('button', { name: 'Import 5 trades', exact: true }).click();
    await page.getByRole('status').filter({ hasText: 'Imported 5, 0 already in the journal, 0 skipped, 1 rejected.' }).waitFor();
    assert.equal(await page.getByTestId('import-imported').innerText(), '5');
    assert.equal(await page.getByTestId('import-duplicates').innerText(), '0');
    assert.equal(await page.getByTestId('import-rejected').innerText(), '1');
    const rejected = page.getByRole('region', { name: 'Rejected rows' }).locator('tbody tr');
    assert.equal(await rejected.count(), 1);
    await rejected.first().getByRole('cell', { name: '6', exact: true }).waitFor();
    await rejected.first().getByText('VALIDATION_ERROR').waitFor();
    await page.getByRole('region', { name: 'Import trades' }).screenshot({ path: path.join(ARTEFACTS, 'journal-import-report.png') });

    // The trades (newest first), read again after the import.
    await page.getByText('5 trades shown (all of the range)').waitFor();
    assert.equal(await tradeRows(page).count(), 5);
    assert.deepEqual(await tradeRows(page).locator('th').allInnerTexts(), ['MSFT', 'TSLA', 'TSLA', 'AAPL', 'AAPL']);
    await tradeRows(page).last().getByText('Breakout, first try').waitFor();

    // Totals: the service's figures, shown in the account's currency.
    const journal = (await (await bed.api(token, 'GET', `/api/accounts/${accountId}/journal`)).json()) as {
      totals: Record<string, string | number | null>;
      balance: string;
    };
    assert.deepEqual(
      { ...journal.totals, balance: journal.balance },
      {
        realizedPnl: '80',
        fees: '2',
        netPnl: '78',
        roundTrips: 2,
        wins: 1,
        losses: 1,
        winRate: '0.5',
        profitFactor: '4.9',
        expectancy: '39',
        averageWin: '98',
        averageLoss: '-20',
        largestWin: '98',
        largestLoss: '-20',
        maxDrawdown: '20',
        averageR: null,
        expectancyR: null,
        balance: '10078',
      },
    );
    const card = (key: string) => page.getByTestId(`total-${key}`).locator('dd').first();
    const shown: Record<string, string> = {};
    for (const key of ['netPnl', 'realizedPnl', 'fees', 'roundTrips', 'winRate', 'profitFactor', 'expectancy', 'averageLoss', 'maxDrawdown', 'balance'])
      shown[key] = await card(key).innerText();
    assert.deepEqual(shown, {
      netPnl: '+$78.00',
      realizedPnl: '+$80.00',
      fees: '$2.00',
      roundTrips: '2',
      winRate: '50%',
      profitFactor: '4.9',
      expectancy: '+$39.00',
      averageLoss: '-$20.00',
      maxDrawdown: '$20.00',
      balance: '$10,078.00',
    });
    // Each amount carries the figure exactly as the service wrote it.
    assert.equal(await card('netPnl').locator('data').getAttribute('value'), journal.totals.netPnl);
    await page.getByTestId('total-roundTrips').getByText('1 won · 1 lost').waitFor();

    // The chart: a bar a day, the loss below the zero line; its words name the days; the figures table has AAPL's day at 98.
    const chart = page.getByRole('img', { name: /Daily net P&L from/ });
    assert.match((await chart.getAttribute('aria-label')) ?? '', /2 trading days with realized P&L, 1 up, 1 down; best \+\$98\.00 on .+, worst -\$20\.00 on /);
    assert.equal(await chart.locator('rect.jr-bar.up').count(), 1);
    assert.equal(await chart.locator('rect.jr-bar.down').count(), 1);
    const zeroY = Number(await chart.locator('line.jr-zero').last().getAttribute('y1'));
    assert.ok(Number(await chart.locator('rect.jr-bar.down').getAttribute('y')) >= zeroY - 0.01, 'the loss hangs from the zero line');
    assert.ok((await chart.locator('text.jr-axis').count()) >= 4, 'a y-axis with labels and the first and last day');
    await page.locator('summary', { hasText: 'Daily figures' }).click();
    await page.getByRole('region', { name: 'Daily figures' }).getByRole('row').filter({ hasText: '+$98.00' }).getByText('+$100.00').waitFor();

    // Open positions.
    const positions = page.getByRole('region', { name: 'Open positions table', exact: true });
    await positions.getByRole('row', { name: /MSFT Long 5 \$200\.00/ }).waitFor();

    // Filter by symbol narrows the list (typed in lower case), and back.
    await page.getByLabel('Symbol').fill('tsla');
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await page.getByText('2 trades shown').waitFor();
    assert.deepEqual(await tradeRows(page).locator('th').allInnerTexts(), ['TSLA', 'TSLA']);
    await page.getByRole('button', { name: 'All symbols' }).click();
    await page.getByText('5 trades shown').waitFor();

    // A direct load of the page's address (the service answers it) shows the same.
    await page.reload();
    await page.getByRole('heading', { name: 'Journal: Swing' }).waitFor();
    await page.getByText('5 trades shown').waitFor();

    // Export: a download of the service's CSV, fetched with the token.
    const download = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Export CSV' }).click();
    const file = await download;
    assert.match(file.suggestedFilename(), /^trades-swing-\d{4}-\d{2}-\d{2}-to-\d{4}-\d{2}-\d{2}\.csv$/);
    const exported = readFileSync(await file.path(), 'utf8')
      .trim()
      .split(/\r\n/);
    assert.equal(exported[0], 'symbol,side,quantity,price,fee,executedAt,externalId,note,tags,assetClass,multiplier,stopPrice');
    assert.equal(exported.length, 6);
    assert.ok(
      exported.some((l) => l.startsWith(`AAPL,buy,10,100,1,${D1}T14:30:00.000Z,ex-1,"Breakout, first try",`)),
      exported.join('\n'),
    );

    // Note and tags of a trade.
    await page.getByRole('button', { name: /^Edit note and tags of buy 5 MSFT/ }).click();
    const edit = page.getByRole('form', { name: /^Edit buy 5 MSFT/ });
    await edit.getByLabel('Note').fill('Core holding');
    await edit.getByLabel('Tags').fill('long-term, core');
    await edit.getByRole('button', { name: 'Save' }).click();
    const msft = tradeRows(page).filter({ has: page.getByRole('rowheader', { name: 'MSFT' }) });
    await msft.getByText('Core holding').waitFor();
    assert.deepEqual(await msft.getByRole('list', { name: 'Tags' }).getByRole('listitem').allInnerTexts(), ['long-term', 'core']);

    // Light and dark, desktop and phone: screenshots, no sideways scroll, axe finds nothing serious.
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      for (const [w, h, size] of [
        [1280, 800, 'desktop'],
        [390, 844, 'phone'],
      ] as const) {
        await page.setViewportSize({ width: w, height: h });
        await page.getByRole('img', { name: /Daily net P&L from/ }).waitFor();
        await page.waitForTimeout(150);
        assert.ok(await fitsWidth(page), `no sideways scroll at ${w} px (${scheme}): ${await overflowing(page)}`);
        await screenshot(page, `journal-${size}-${scheme}`);
        assert.deepEqual(await axeViolations(page), [], `${size} ${scheme}`);
      }
    }
    await page.emulateMedia({ colorScheme: 'light' });
    await page.setViewportSize({ width: 1280, height: 800 });

    // The same file again would add nothing: the dry run says so, and there is nothing to import.
    await page.getByLabel('CSV file').setInputFiles(csvFile('trades.csv', CSV));
    await page.getByTestId('preview-duplicates').filter({ hasText: '5' }).waitFor();
    assert.equal(await page.getByTestId('preview-imported').innerText(), '0');
    assert.ok(await page.getByRole('button', { name: 'Nothing to import' }).isDisabled());
    await page.getByRole('button', { name: 'Cancel' }).click();

    // Delete the open position's fill: the journal is read again without it.
    page.once('dialog', (d) => void d.accept());
    await page.getByRole('button', { name: /^Delete buy 5 MSFT/ }).click();
    await positions.waitFor({ state: 'detached' });
    await page.getByText('No open positions.').waitFor();
    await page.getByText('4 trades shown').waitFor();
    await context.close();
  });

  test('issue 28: trades page by cursor ("Load more"); the range is chosen by trading days; the page is keyboard reachable; an unknown account is said in words', async () => {
    const { page, token, context } = await bed.signedIn('journal-pages');
    const accountId = await createAccount(token, 'Scalps');
    const rows = ['symbol,side,quantity,price,executedAt'];
    for (let i = 0; i < 55; i++) rows.push(`SPY,${i % 2 === 0 ? 'buy' : 'sell'},1,${500 + (i % 7)},${D1}T13:${String(i).padStart(2, '0')}:00Z`);
    rows.push(`QQQ,buy,3,400,${monthDay(-2, 15)}T15:00:00Z`);
    assert.deepEqual(await importCsv(token, accountId, rows.join('\n')), {
      format: 'generic',
      timezone: null,
      dryRun: false,
      imported: 56,
      duplicates: 0,
      skipped: 0,
      rejectedCount: 0,
      rejected: [],
    });
    await page.goto(`/accounts/${accountId}/journal`);
    await page.getByText('50 trades shown').waitFor();
    await page.getByRole('button', { name: 'Load more trades' }).click();
    await page.getByText('55 trades shown (all of the range)').waitFor();
    assert.equal(await page.getByRole('button', { name: 'Load more trades' }).count(), 0);

    // The fill on the 15th two months back (45–76 days) is outside the default 30 days; a longer range brings it in,
    // and a range of its month's 14th–16th shows that month's calendar.
    await page.getByRole('button', { name: 'Last 1 year' }).click();
    await page.getByText('50 trades shown').waitFor();
    assert.equal(await page.getByLabel('From', { exact: true }).inputValue(), utcDay(-364));
    await page.getByLabel('From', { exact: true }).fill(monthDay(-2, 14));
    await page.getByLabel('To', { exact: true }).fill(monthDay(-2, 16));
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await page.getByText('1 trade shown (all of the range)').waitFor();
    await page
      .getByRole('region', { name: 'Open positions table', exact: true })
      .getByRole('row', { name: /QQQ Long 3/ })
      .waitFor();

    // Keyboard: Tab reaches the range, the chart's figures, the trades' box, the filter, the import and export.
    await page.locator('body').click({ position: { x: 5, y: 5 } });
    const reached = new Set<string>();
    for (let i = 0; i < 160; i++) {
      await page.keyboard.press('Tab');
      // What has focus: its tag, its label or text, its type.
      reached.add(
        await page.evaluate<string>(
          "(el => el ? `${el.tagName.toLowerCase()}:${el.getAttribute('aria-label') ?? el.textContent.trim()}:${el.type ?? ''}` : '')(document.activeElement)",
        ),
      );
    }
    const seen = [...reached].join('\n');
    for (const want of [
      /^button:Export CSV/m,
      /^input:.*:date$/m,
      /^button:Show/m,
      /^div:Trades table:/m,
      /^input:.*:text$/m,
      /^button:.* net, a (gain|loss|flat):button$/m,
      /^select:/m,
      /^input:.*:file$/m,
      /^summary:Daily figures/m,
    ])
      assert.match(seen, want);

    await page.goto('/accounts/0190c7e2-0000-7000-8000-000000000000/journal');
    await page.getByRole('alert').first().waitFor();
    assert.deepEqual(await axeViolations(page), []);
    await context.close();
  });
});

describe('advisor cards', () => {
  test('issue 28: a chat turn that calls get_journal, list_trades and position_size renders their cards: the totals table and the daily chart, the trades it read, the size with its figures', async () => {
    const { page, token, context } = await bed.signedIn('journal-chat');
    await withOpenAiKey(bed, token);
    const accountId = await createAccount(token, 'Swing');
    await importCsv(token, accountId, CSV);
    bed.openai.enqueueStream({
      toolCalls: [
        { name: 'get_journal', arguments: { account: 'Swing', from: utcDay(-29), to: utcDay(0) } },
        { name: 'list_trades', arguments: { account: 'Swing', from: utcDay(-29), to: utcDay(0), limit: 3 } },
        { name: 'position_size', arguments: { entry: 50, stop: 48, riskPercent: 1 } },
      ],
    });
    bed.openai.enqueueStream({ chunks: ['You netted $78 over two round trips; risk 1% → 50 shares.'] });
    await page.getByLabel('Message', { exact: true }).fill('How did my month go, and how big should a 50/48 trade be?');
    await page.keyboard.press('Enter');
    await page.locator('.message.assistant').last().locator('.reply-footer', { hasText: 'tokens' }).waitFor();

    const journal = page.locator('[data-tool=get_journal]');
    assert.equal(await journal.getByTestId('total-netPnl').locator('td').innerText(), '+$78.00');
    assert.equal(await journal.getByTestId('total-maxDrawdown').locator('td').innerText(), '$20.00');
    assert.equal(await journal.getByTestId('total-balance').locator('td').innerText(), '$10,078.00');
    await journal.getByRole('img', { name: /2 trading days with realized P&L, 1 up, 1 down/ }).waitFor();
    assert.equal(await journal.locator('rect.jr-bar').count(), 2);
    await journal.getByText('Open: MSFT long 5 @ 200').waitFor();
    await journal.getByRole('link', { name: 'Swing' }).waitFor();

    // The three newest of the five fills, as the model read them; the range holds more.
    const trades = page.locator('[data-tool=list_trades]');
    const rows = trades.getByRole('region', { name: 'Trades of Swing the advisor read' }).locator('tbody tr');
    assert.deepEqual(await rows.locator('th').allInnerTexts(), ['MSFT', 'TSLA', 'TSLA']);
    assert.deepEqual(await rows.locator('td.num').allInnerTexts(), ['5', '$200.00', '$0.00', '2', '$240.00', '$0.00', '2', '$250.00', '$0.00']);
    assert.deepEqual(await rows.locator('.jr-side').allInnerTexts(), ['Buy', 'Sell', 'Buy']);
    // The browser's locale is the bed's (en-US): the trading day as the Journal page writes it.
    const d2 = new Intl.DateTimeFormat('en-US', { dateStyle: 'medium', timeZone: 'UTC' }).format(Date.parse(`${D2}T00:00:00Z`));
    assert.deepEqual(await rows.locator('td:first-child').allInnerTexts(), [d2, d2, d2]);
    await rows.nth(1).getByText('Stopped out').waitFor();
    await trades.getByText('3 trades, newest first').waitFor();
    await trades.getByRole('link', { name: 'all of them in the journal' }).waitFor();

    // balance 10,078 × 1 % = 100.78 at risk; 2 a share → 50 shares, 2,500 of stock.
    const size = page.locator('[data-tool=position_size]');
    const figure = async (key: string) => size.getByTestId(`size-${key}`).locator('dd').innerText();
    assert.deepEqual(
      {
        shares: await figure('shares'),
        risk: await figure('riskAmount'),
        perShare: await figure('perShareRisk'),
        value: await figure('positionValue'),
        balance: await figure('balance'),
      },
      { shares: '50', risk: '$100.78', perShare: '$2.00', value: '$2,500.00', balance: '$10,078.00' },
    );

    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      for (const [w, h, name] of [
        [1280, 800, 'desktop'],
        [390, 844, 'phone'],
      ] as const) {
        await page.setViewportSize({ width: w, height: h });
        await page.waitForTimeout(150);
        assert.ok(await fitsWidth(page), `no sideways scroll at ${w} px (${scheme}): ${await overflowing(page)}`);
        await screenshot(page, `journal-chat-${name}-${scheme}`);
        // The chat scrolls inside its message list: the cards themselves, whole.
        await journal
          .locator('xpath=ancestor::*[contains(@class, "message")][1]')
          .screenshot({ path: path.join(ARTEFACTS, `journal-chat-cards-${name}-${scheme}.png`) });
        assert.deepEqual(await axeViolations(page), [], `${name} ${scheme}`);
      }
    }
    // The card's account links to its Journal page.
    await page.setViewportSize({ width: 1280, height: 800 });
    await journal.getByRole('link', { name: 'Swing' }).click();
    await page.getByRole('heading', { name: 'Journal: Swing' }).waitFor();
    await context.close();
  });
});
