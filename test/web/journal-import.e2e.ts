// DESIGN §17 on the Journal page, in real Chromium against the real service: a Tradovate file's dry run
// (format, zone, counts, preview; another zone, another format) then its import, Cancel writing nothing;
// round trips with R (an ES future at ×50); reports by weekday with a what-if; the calendar; the range and
// the symbol in the address (reload, back, forward) narrowing the whole page and the export; the focus
// after Import and "Load more"; prices at their own precision; the chart's words and labels; layout shift
// measured while the page loads. Exact text; both sizes, light and dark, axe, no sideways scroll.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { ARTEFACTS, axeViolations, screenshot, settlesTo, sidewaysOverflow, startBed, type Bed } from './harness.ts';

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
const D3 = utcDay(-1);
const US = (d: string) => `${d.slice(5, 7)}/${d.slice(8, 10)}/${d.slice(0, 4)}`;
const WEEKDAY = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const weekdayOf = (d: string) => WEEKDAY[new Date(`${d}T00:00:00Z`).getUTCDay()] ?? '';
/** As the page writes an instant (the bed's browser is en-US) in a zone. */
const shown = (iso: string, timeZone: string) => new Intl.DateTimeFormat('en-US', { dateStyle: 'medium', timeStyle: 'short', timeZone }).format(new Date(iso));
const dayWords = (d: string) => new Intl.DateTimeFormat('en-US', { dateStyle: 'medium', timeZone: 'UTC' }).format(new Date(`${d}T00:00:00Z`));

/** A Tradovate Orders CSV: the columns it writes, a filled row, a cancelled one, a row with a side it cannot be. */
const TRADOVATE_HEADER =
  'orderId,Account,Order ID,B/S,Contract,Product,Product Description,avgPrice,filledQty,Fill Time,lastCommandId,Status,_priceFormat,_priceFormatType,_tickSize,spreadDefinitionId,Version ID,Timestamp,Date,Quantity,Text,Type,Limit Price,Stop Price,decimalLimit,decimalStop,Filled Qty,Avg Fill Price,decimalFillAvg';
function tradovateRow(id: number, side: string, contract: string, price: string, qty: number, day: string, time: string, status = 'Filled'): string {
  const product = contract.replace(/[FGHJKMNQUVXZ]\d$/, '');
  const at = `${US(day)} ${time}`;
  const filled = status === 'Filled' ? qty : 0;
  return [
    id,
    'DEMO1',
    id,
    ` ${side}`,
    contract,
    product,
    product,
    filled ? price : '',
    filled,
    filled ? at : '',
    id,
    ` ${status}`,
    -2,
    0,
    0.25,
    '',
    id,
    at,
    US(day),
    qty,
    '',
    'Market',
    '',
    '',
    '',
    '',
    filled,
    filled ? price : '',
    filled ? price : '',
  ].join(',');
}
const TRADOVATE = [
  TRADOVATE_HEADER,
  tradovateRow(1, 'Buy', 'ESZ6', '4800', 1, D1, '10:30:00'),
  tradovateRow(2, 'Sell', 'ESZ6', '4808.25', 1, D1, '11:15:00'),
  tradovateRow(3, 'Buy', 'ESZ6', '4790', 1, D1, '11:20:00', 'Canceled'),
  tradovateRow(4, 'Buy', 'MESZ6', '4800', 2, D2, '10:00:00'),
  tradovateRow(5, 'Sell', 'MESZ6', '4790', 2, D2, '10:20:00'),
  tradovateRow(6, 'Hold', 'MESZ6', '4790', 1, D2, '10:40:00'),
].join('\r\n');

/**
 * Our own layout: one ES contract bought 4800 and sold 4808.25 with 2.25 of fees each way and a stop at
 * 4795 (+412.5 − 4.5 = +408, risk 250, +1.632R); 1,000 PENNY bought at 0.0012 and sold at 0.0019 (+0.70);
 * 10 XYZ bought at 0.4567 with a fee of 1 on a day of its own (a day of fees alone, nothing realized).
 */
const GENERIC = [
  'symbol,side,quantity,price,fee,executedAt,externalId,assetClass,stopPrice',
  `ES,buy,1,4800,2.25,${D1}T14:30:00Z,g-1,future,4795`,
  `ES,sell,1,4808.25,2.25,${D1}T15:15:00Z,g-2,future,`,
  `PENNY,buy,1000,0.0012,0,${D2}T14:00:00Z,g-3,stock,`,
  `PENNY,sell,1000,0.0019,0,${D2}T14:05:00Z,g-4,stock,`,
  `XYZ,buy,10,0.4567,1,${D3}T15:00:00Z,g-5,stock,`,
].join('\n');

function file(name: string, text: string): string {
  const f = path.join(os.tmpdir(), `${process.pid}-${name}`);
  writeFileSync(f, text);
  return f;
}

async function account(token: string, name: string, timezone: string): Promise<string> {
  const res = await bed.api(token, 'POST', '/api/accounts', { name, currency: 'USD', timezone, startingBalance: '10000' });
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

const tradeCount = async (token: string, accountId: string) =>
  ((await (await bed.api(token, 'GET', `/api/accounts/${accountId}/trades/count`)).json()) as { count: number }).count;
/** The elements that reach past the window's right edge (outside the boxes that scroll). */
const overflowing = (page: Page) =>
  page.evaluate<string>(
    "[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5 && !e.parentElement?.closest('.jr-scroll')).slice(0, 8).map(e => `${e.tagName.toLowerCase()}.${e.className?.baseVal ?? e.className} ${Math.round(e.getBoundingClientRect().right)}`).join(', ')",
  );
const card = (page: Page, key: string) => page.getByTestId(`total-${key}`).locator('dd').first();
const rowsOf = (page: Page, region: string) => page.getByRole('region', { name: region, exact: true }).locator('tbody tr');
const cellTexts = async (page: Page, region: string, n = 0) => (await rowsOf(page, region).nth(n).locator('th, td').allInnerTexts()).map((t) => t.trim());
const focused = (page: Page) =>
  page.evaluate<string>("(e => e ? `${e.tagName.toLowerCase()}|${e.getAttribute('type') ?? ''}|${e.textContent?.trim() ?? ''}` : '')(document.activeElement)");
/** The focus lands on `expected` (tag|type|text): waited for, as the page moves it in an effect after the re-render. */
const focusSettles = (page: Page, expected: string, message?: string) => settlesTo(page, () => focused(page), expected, message);

/** Date labels of the chart: none touches the next (4 px at least between their boxes). */
async function labelsApart(page: Page): Promise<{ n: number; tightest: number }> {
  return page.evaluate<{ n: number; tightest: number }>(
    "(() => { const b = [...document.querySelectorAll('svg[data-testid=pnl-chart] text.jr-date')].map(t => t.getBBox()).sort((p, q) => p.x - q.x); let tightest = Infinity; for (let i = 1; i < b.length; i++) tightest = Math.min(tightest, b[i].x - (b[i - 1].x + b[i - 1].width)); return { n: b.length, tightest }; })()",
  );
}

async function showMonthOf(page: Page, d: string): Promise<void> {
  for (let i = 0; i < 3 && (await page.locator(`.jr-calendar button[data-day="${d}"]`).count()) === 0; i++)
    await page.getByRole('button', { name: 'Previous month' }).click();
}

describe('journal page: real trades in (DESIGN §17)', () => {
  test('a Tradovate file: dry run (format, zone, counts, preview), another zone and format, Cancel writes nothing, Import writes and gives the focus back; round trips, calendar, report by weekday and its what-if; filters in the address', async () => {
    const { page, token, context } = await bed.signedIn('jr-import');
    const id = await account(token, 'Futures', 'Asia/Kolkata');
    await page.goto(`/accounts/${id}/journal`);
    await page.getByRole('heading', { name: 'Journal: Futures' }).waitFor();
    const csv = file('tradovate.csv', TRADOVATE);

    // The dry run, as soon as the file is chosen.
    await page.getByLabel('CSV file').setInputFiles(csv);
    const preview = page.getByRole('group', { name: /^Before importing/ });
    await preview.waitFor();
    assert.equal(await page.getByTestId('preview-format').innerText(), 'Tradovate — Orders or Fills CSV (detected)');
    assert.equal(await page.getByTestId('preview-timezone').innerText(), 'Asia/Kolkata');
    const counts = async () => Promise.all(['imported', 'duplicates', 'skipped', 'rejected'].map(async (k) => page.getByTestId(`preview-${k}`).innerText()));
    assert.deepEqual(await counts(), ['4', '0', '1', '1']);
    assert.deepEqual((await cellTexts(page, 'Rejected rows')).slice(0, 2), ['6', 'VALIDATION_ERROR']);
    assert.equal(await rowsOf(page, 'Trades to import').count(), 4);
    assert.deepEqual(await cellTexts(page, 'Trades to import'), [
      shown(`${D1}T10:30:00+05:30`, 'Asia/Kolkata'),
      'ESZ6 · future ×50',
      'Buy',
      '1',
      '$4,800.00',
      '$0.00',
    ]);
    assert.deepEqual(await cellTexts(page, 'Trades to import', 3), [
      shown(`${D2}T10:20:00+05:30`, 'Asia/Kolkata'),
      'MESZ6 · future ×5',
      'Sell',
      '2',
      '$4,790.00',
      '$0.00',
    ]);
    assert.equal(await tradeCount(token, id), 0, 'a dry run writes nothing');

    // Times read in another zone: Tokyo's 10:30 is Kolkata's 7:00.
    await preview.getByLabel('Time zone of times without an offset').fill('Asia/Tokyo');
    await preview.getByRole('button', { name: 'Read again' }).click();
    await page.getByTestId('preview-timezone').filter({ hasText: 'Asia/Tokyo' }).waitFor();
    assert.equal((await cellTexts(page, 'Trades to import'))[0], shown(`${D1}T10:30:00+09:00`, 'Asia/Kolkata'));
    // Another layout: the file lacks its columns, said in words; back to detection.
    await preview.getByLabel('Format').selectOption('generic');
    await page.getByRole('alert').filter({ hasText: 'The file could not be read as trades' }).waitFor();
    await preview.getByLabel('Format').selectOption('');
    await page.getByTestId('preview-format').filter({ hasText: '(detected)' }).waitFor();
    await page.getByRole('alert').waitFor({ state: 'detached' });
    await screenshot(page, 'journal-import-dry-run');

    // Cancel: nothing written, the preview gone, the focus back on the file field.
    await preview.getByRole('button', { name: 'Cancel' }).click();
    await preview.waitFor({ state: 'detached' });
    await focusSettles(page, 'input|file|', 'Cancel gives the focus back to the file field');
    assert.equal(await tradeCount(token, id), 0);

    // Again, in the account's zone, and import.
    await page.getByLabel('CSV file').setInputFiles(csv);
    await preview.getByRole('button', { name: 'Import 4 trades' }).click();
    await page.getByRole('status').filter({ hasText: 'Imported 4, 0 already in the journal, 1 skipped, 1 rejected.' }).waitFor();
    assert.deepEqual(await Promise.all(['imported', 'duplicates', 'skipped', 'rejected'].map((k) => page.getByTestId(`import-${k}`).innerText())), [
      '4',
      '0',
      '1',
      '1',
    ]);
    await focusSettles(page, 'input|file|', 'the focus is back where the import started');
    assert.equal(await tradeCount(token, id), 4);

    // Totals and round trips: ES +412.50 (×50), MES −100 (×5).
    await card(page, 'roundTrips').filter({ hasText: '2' }).waitFor();
    assert.equal(await card(page, 'netPnl').innerText(), '+$312.50');
    await rowsOf(page, 'Round trips table').nth(1).waitFor();
    assert.deepEqual(await cellTexts(page, 'Round trips table', 1), [
      'ESZ6 · future ×50',
      'Long',
      shown(`${D1}T10:30:00+05:30`, 'Asia/Kolkata'),
      shown(`${D1}T11:15:00+05:30`, 'Asia/Kolkata'),
      '45m',
      '1',
      '$4,800.00',
      '$4,808.25',
      '+$412.50',
      '—',
      '',
    ]);
    assert.deepEqual((await cellTexts(page, 'Round trips table', 0)).slice(0, 2), ['MESZ6 · future ×5', 'Long']);
    assert.equal((await cellTexts(page, 'Round trips table', 0))[8], '-$100.00');

    // The calendar: each day's net in text, the colour repeating it.
    await showMonthOf(page, D1);
    const d1 = page.locator(`.jr-calendar button[data-day="${D1}"]`);
    await page.getByRole('button', { name: `${dayWords(D1)}: +$412 net, a gain`, exact: true }).waitFor();
    assert.equal(await d1.locator('.jr-cal-pnl').innerText(), '+$412');
    assert.match((await d1.getAttribute('class')) ?? '', /\bgain\b/);
    await showMonthOf(page, D2);
    const d2 = page.locator(`.jr-calendar button[data-day="${D2}"]`);
    await page.getByRole('button', { name: `${dayWords(D2)}: -$100 net, a loss`, exact: true }).waitFor();
    assert.equal(await d2.locator('.jr-cal-pnl').innerText(), '-$100');
    await d2.focus();
    await page.keyboard.press('Enter');
    assert.equal(await page.locator('.jr-day-detail').innerText(), `${dayWords(D2)}: net -$100.00 (realized -$100.00, fees $0.00) · 2 fills · 1 round trip`);

    // Report by weekday, and the what-if without the weekday MES was opened on.
    await page.getByLabel('Group by').selectOption('weekday');
    await page.waitForURL(/[?&]by=weekday/);
    const w2 = weekdayOf(D2);
    await page.getByRole('checkbox', { name: `Include ${w2}` }).uncheck();
    await page.waitForURL(new RegExp(`exclude=weekday%3A${w2.slice(0, 3).toLowerCase()}`));
    const whatIf = page.getByRole('group', { name: `What if: without ${w2}s` });
    await whatIf.getByTestId('whatif-netPnl').locator('td').nth(1).filter({ hasText: '$' }).waitFor();
    const compare: Record<string, string[]> = {};
    for (const key of ['netPnl', 'roundTrips', 'winRate', 'expectancy', 'profitFactor', 'averageR', 'maxDrawdown'])
      compare[key] = (await whatIf.getByTestId(`whatif-${key}`).locator('td').allInnerTexts()).map((t) => t.trim());
    assert.deepEqual(compare, {
      netPnl: ['+$312.50', '+$412.50'],
      roundTrips: ['2', '1'],
      winRate: ['50%', '100%'],
      expectancy: ['+$156.25', '+$412.50'],
      profitFactor: ['4.125', '—'],
      averageR: ['—', '—'],
      maxDrawdown: ['$100.00', '$0.00'],
    });
    assert.equal(await whatIf.locator('p.hint').innerText(), 'Left out: 1 round trip netting -$100.00.');
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      for (const size of ['desktop', 'phone'] as const) {
        await page.setViewportSize(size === 'desktop' ? { width: 1280, height: 800 } : { width: 390, height: 844 });
        await page.waitForTimeout(200);
        assert.equal(await sidewaysOverflow(page), 0, `no sideways scroll (${size} ${scheme}): ${await overflowing(page)}`);
        await screenshot(page, `journal-17-${size}-${scheme}`);
        assert.deepEqual(await axeViolations(page), [], `${size} ${scheme}`);
      }
    }
    await page.emulateMedia({ colorScheme: 'light' });
    await page.setViewportSize({ width: 1280, height: 800 });
    await whatIf.getByRole('button', { name: `Put back ${w2}s` }).click();
    await whatIf.waitFor({ state: 'detached' });

    // The symbol narrows the whole page, and the address keeps it (reload, back, forward).
    await page.getByLabel('Symbol').fill('esz6');
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await page.waitForURL(/[?&]symbol=ESZ6/);
    const narrowed = async () => {
      await page.getByRole('heading', { name: 'Daily net P&L · ESZ6' }).waitFor();
      await card(page, 'netPnl').filter({ hasText: '+$412.50' }).waitFor();
      assert.equal(await card(page, 'roundTrips').innerText(), '1');
      await rowsOf(page, 'Trades table').nth(1).waitFor();
      assert.equal(await rowsOf(page, 'Trades table').count(), 2);
      assert.equal(await rowsOf(page, 'Round trips table').count(), 1);
      assert.deepEqual(await rowsOf(page, 'Report table').locator('th').allInnerTexts(), [weekdayOf(D1)]);
    };
    await narrowed();
    const url = new URL(page.url());
    assert.deepEqual([...url.searchParams.keys()].sort(), ['by', 'from', 'symbol', 'to']);
    const download = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Export CSV' }).click();
    const exported = readFileSync(await (await download).path(), 'utf8')
      .trim()
      .split(/\r?\n/);
    assert.equal(exported.length, 3, exported.join('\n'));
    assert.ok(
      exported.slice(1).every((l) => l.startsWith('ESZ6,')),
      exported.join('\n'),
    );
    await page.reload();
    await narrowed();
    assert.equal(await page.getByLabel('Symbol').inputValue(), 'ESZ6');
    await page.goBack();
    await card(page, 'netPnl').filter({ hasText: '+$312.50' }).waitFor();
    assert.equal(await page.getByLabel('Symbol').inputValue(), '');
    assert.equal(new URL(page.url()).searchParams.get('symbol'), null);
    await page.goForward();
    await narrowed();
    await context.close();
  });

  test('an ES round trip with fees and a stop (+$408.00, +1.632R); prices at their own precision (0.0012); a fees-only day not drawn nor counted; date labels apart; "Load more" keeps the focus; layout shift ≤ 0.05 while the page loads', async () => {
    const { page, token, context } = await bed.signedIn('jr-precision');
    const id = await account(token, 'Ticks', 'Etc/UTC');
    await importCsv(token, id, GENERIC);
    const rows = ['symbol,side,quantity,price,executedAt'];
    for (let i = 0; i < 52; i++)
      rows.push(`SPY,${i % 2 === 0 ? 'buy' : 'sell'},1,${500 + (i % 7)},${utcDay(-20 + Math.floor(i / 4))}T13:${String(i).padStart(2, '0')}:00Z`);
    await importCsv(token, id, rows.join('\n'));

    // Layout shift while the page loads, at both sizes: a PerformanceObserver from the first script on.
    const cls: Record<string, number> = {};
    for (const size of ['desktop', 'phone'] as const) {
      const ctx = await bed.browser.newContext({
        baseURL: bed.origin,
        viewport: size === 'desktop' ? { width: 1280, height: 800 } : { width: 390, height: 844 },
      });
      const session = await page.evaluate<string>("sessionStorage.getItem('advisor.session') ?? ''");
      await ctx.addInitScript(`sessionStorage.setItem('advisor.session', ${JSON.stringify(session)});
        window.__cls = 0;
        new PerformanceObserver((list) => { for (const e of list.getEntries()) if (!e.hadRecentInput) window.__cls += e.value; }).observe({ type: 'layout-shift', buffered: true });`);
      const p = await ctx.newPage();
      await p.goto(`/accounts/${id}/journal`);
      await p.getByRole('region', { name: 'Trades table', exact: true }).waitFor();
      await p.getByRole('region', { name: 'Round trips table', exact: true }).waitFor();
      await p.getByRole('region', { name: 'Report table', exact: true }).waitFor();
      await p.waitForTimeout(1000);
      cls[size] = await p.evaluate<number>('window.__cls');
      await ctx.close();
    }
    writeFileSync(path.join(ARTEFACTS, 'journal-cls.json'), JSON.stringify(cls));
    assert.ok((cls.desktop ?? 1) <= 0.05 && (cls.phone ?? 1) <= 0.05, `CLS ${JSON.stringify(cls)}`);

    await page.goto(`/accounts/${id}/journal`);
    await rowsOf(page, 'Round trips table').first().waitFor();
    const es = rowsOf(page, 'Round trips table').filter({ has: page.getByRole('rowheader', { name: /^ES/ }) });
    assert.deepEqual(
      (await es.locator('th, td').allInnerTexts()).map((t) => t.trim()),
      [
        'ES · future ×50',
        'Long',
        shown(`${D1}T14:30:00Z`, 'UTC'),
        shown(`${D1}T15:15:00Z`, 'UTC'),
        '45m',
        '1',
        '$4,800.00',
        '$4,808.25',
        '+$408.00',
        '+1.632R',
        '',
      ],
    );
    const penny = rowsOf(page, 'Round trips table').filter({ has: page.getByRole('rowheader', { name: 'PENNY' }) });
    assert.deepEqual(
      (await penny.locator('td.num').allInnerTexts()).map((t) => t.trim()),
      ['1,000', '$0.0012', '$0.0019', '+$0.70', '—'],
    );

    // Prices as the instrument quotes them, in the trades and the open positions.
    // A trade's cells: quantity, price, fee are its td.num, in that order.
    const prices = async (symbol: string) => {
      const rows = rowsOf(page, 'Trades table').filter({ has: page.getByRole('rowheader', { name: symbol, exact: true }) });
      const out: string[] = [];
      for (let i = 0; i < (await rows.count()); i++) out.push((await rows.nth(i).locator('td.num').nth(1).innerText()).trim());
      return out;
    };
    await rowsOf(page, 'Trades table').first().waitFor();
    assert.deepEqual(await prices('XYZ'), ['$0.4567']);
    assert.deepEqual(await prices('PENNY'), ['$0.0019', '$0.0012']);
    assert.deepEqual(await cellTexts(page, 'Open positions table'), ['XYZ', 'Long', '10', '$0.4567', shown(`${D3}T15:00:00Z`, 'UTC')]);
    assert.equal(
      await rowsOf(page, 'Trades table')
        .filter({ has: page.getByRole('rowheader', { name: /^ES/ }) })
        .first()
        .locator('th')
        .innerText(),
      'ES · future ×50',
    );

    // The chart draws the days something was realized and says so; the day of fees alone is named apart.
    const chart = page.getByRole('img', { name: /Daily net P&L from/ });
    const summary = (await chart.getAttribute('aria-label')) ?? '';
    assert.match(
      summary,
      /: \d+ trading days with realized P&L, \d+ up, \d+ down; best \+\$408\.00 on .+, worst .+\. 1 more day with fills and nothing realized \(fees only\) not drawn\.$/,
    );
    const [, drawnDays] = /: (\d+) trading days with realized P&L/.exec(summary) ?? [];
    assert.equal(await chart.locator('rect.jr-bar').count(), Number(drawnDays));
    assert.equal(await chart.locator(`rect[data-day="${D3}"]`).count(), 0);
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 844 });
      await page.waitForTimeout(200);
      const labels = await labelsApart(page);
      assert.ok(labels.n >= 2 && labels.tightest >= 4, `date labels at ${width} px: ${JSON.stringify(labels)}`);
    }
    await page.setViewportSize({ width: 1280, height: 800 });

    // "Load more": the focus stays with the list (on the count when the last page came and the button went).
    await page.getByRole('button', { name: 'Load more trades' }).click();
    await page.getByText('57 trades shown (all of the range)').waitFor();
    await focusSettles(page, 'span||57 trades shown (all of the range)');
    await context.close();
  });
});
