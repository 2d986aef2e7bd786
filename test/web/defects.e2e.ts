// Issue 29, defects 1–10: each as a trader met it, in real Chromium against the real service and the
// project's fakes (each of these tests failed before its fix).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { makeStripeEvent, signStripePayload } from '../fakes/index.ts';
import {
  WEBHOOK_SECRET,
  ask,
  assistant,
  composer,
  replyDone,
  screenshot,
  settlesTo,
  sidewaysOverflow,
  startBed,
  waitUntil,
  withOpenAiKey,
  type Bed,
} from './harness.ts';

let bed: Bed;
before(async () => {
  bed = await startBed();
});
after(async () => {
  await bed.close();
});

/** A reply of `n` short lines, one chunk every `delayMs`: long enough to scroll, slow enough to act during it. */
const slowReply = (n: number, delayMs: number) => ({ chunks: Array.from({ length: n }, (_, i) => `Line ${i} of the answer.\n\n`), delayMs });
const box = async (page: Page, selector: string) => {
  const b = await page.locator(selector).first().boundingBox();
  assert.ok(b, `${selector} is on the page`);
  return b;
};

describe('defect 1: the checkout return', () => {
  test('issue 29 defect 1: Buy on the printed 127.0.0.1 origin returns to that origin, signed in; the return page says pending until the webhook credits the session, then credited; an expired session says so', async () => {
    const { page, context } = await bed.signedIn('d1');
    await page.getByRole('link', { name: 'Credits' }).click();
    await page.getByRole('button', { name: 'Buy Starter' }).click();
    await page.waitForURL(/\/c\/pay\/cs_/);
    const sessionId = new URL(page.url()).pathname.split('/').at(-1) ?? '';
    const session: Record<string, unknown> = bed.stripe.getSession(sessionId) ?? {};
    const successUrl = String(session['success_url']).replace('{CHECKOUT_SESSION_ID}', sessionId);
    assert.equal(new URL(successUrl).origin, bed.origin, 'the return comes back to the origin the page was opened on');
    assert.equal(new URL(String(session['cancel_url'])).origin, bed.origin);

    // Back before any webhook: nothing is paid yet, and the page must not say it is.
    await page.goto(successUrl);
    const state = page.getByRole('status');
    await state.filter({ hasText: 'Waiting for the payment to be confirmed' }).waitFor();
    assert.equal(await page.getByText('went through').count(), 0);
    await screenshot(page, 'd1-billing-pending');
    const payload = JSON.stringify(makeStripeEvent('checkout.session.completed', bed.stripe.completeSession(sessionId)));
    const hook = await fetch(`${bed.origin}/api/billing/webhooks/stripe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': signStripePayload(payload, WEBHOOK_SECRET) },
      body: payload,
    });
    assert.equal(hook.status, 200);
    await state.filter({ hasText: '100 credits are in your wallet' }).waitFor({ timeout: 15_000 });
    await page.getByTestId('credits').filter({ hasText: '100' }).waitFor();

    // A session whose 24 hours ran out unpaid.
    await page.route('**/api/billing/checkout/cs_expired_test', (route) =>
      route.fulfill({
        json: {
          sessionId: 'cs_expired_test',
          state: 'expired',
          packId: 'starter',
          credits: 100,
          amount: 500,
          currency: 'usd',
          createdAt: '2030-01-01T00:00:00.000Z',
          expiresAt: '2030-01-02T00:00:00.000Z',
          creditedAt: null,
        },
      }),
    );
    await page.goto('/billing/success?session_id=cs_expired_test');
    await page.getByRole('status').filter({ hasText: 'This checkout expired before it was paid' }).waitFor();
    await context.close();
  });
});

describe('defects 2, 3, 6 and 10: while a reply streams', () => {
  test('issue 29 defect 2: text typed while a reply streams is still in the box when the reply ends', async () => {
    const { page, token, context } = await bed.signedIn('d2');
    await withOpenAiKey(bed, token);
    bed.openai.enqueueStream(slowReply(60, 30));
    await ask(page, 'Explain slowly');
    await assistant(page).getByText('Line 3 of', { exact: false }).waitFor();
    await composer(page).pressSequentially('My next question');
    await replyDone(page);
    assert.equal(await composer(page).inputValue(), 'My next question');
    await context.close();
  });

  test('issue 29 defect 3: the reader can scroll up while a reply streams; the view follows the bottom only while the reader is there', async () => {
    const { page, token, context } = await bed.signedIn('d3');
    await withOpenAiKey(bed, token);
    bed.openai.enqueueStream(slowReply(150, 25));
    await ask(page, 'A long answer please');
    await assistant(page).getByText('Line 40 of', { exact: false }).waitFor();
    const log = page.getByRole('log', { name: 'Messages' });
    const atBottom = () => log.evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight < 40);
    assert.equal(await atBottom(), true, 'following the reply while at the bottom');
    await log.evaluate((el) => (el.scrollTop = 0));
    await page.waitForTimeout(800);
    assert.ok((await log.evaluate((el) => el.scrollTop)) < 20, 'still where the reader scrolled to');
    await log.evaluate((el) => (el.scrollTop = el.scrollHeight));
    await page.waitForTimeout(400);
    assert.equal(await atBottom(), true, 'following again once back at the bottom');
    await replyDone(page);
    await context.close();
  });

  test('issue 29 defect 10: the header shows the conversation’s title from the first frame of its first reply', async () => {
    const { page, token, context } = await bed.signedIn('d10a');
    await withOpenAiKey(bed, token);
    let release: () => void = () => undefined;
    bed.openai.enqueueStream({ chunks: ['One', ' two'], hold: { afterChunks: 1, until: new Promise<void>((r) => (release = r)) } });
    await ask(page, 'Was my NVDA entry too early?');
    await assistant(page).getByText('One').waitFor();
    assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'Was my NVDA entry too early?');
    release();
    await replyDone(page);
    await context.close();
  });

  test('issue 29 defect 6: the box is focused on /chat; Skip lands in it; each conversation of the list is one Tab stop; Escape stops a reply', async () => {
    const { page, token, context } = await bed.signedIn('d6');
    await withOpenAiKey(bed, token);
    for (let i = 0; i < 9; i++) {
      bed.openai.enqueueStream({ chunks: ['Ok.'] });
      const r = await bed.api(token, 'POST', '/api/advisor/conversations/new/messages/stream', { text: `Question ${i}`, clientMessageId: crypto.randomUUID() });
      assert.equal(r.status, 200);
      await r.json().catch(() => undefined);
    }
    await page.goto('/chat');
    await page.getByRole('link', { name: /Question 8/ }).waitFor();
    await waitUntil(page, "document.activeElement?.id === 'message'");
    const rows = page.getByRole('navigation', { name: 'Conversations' }).getByRole('listitem');
    assert.equal(await rows.count(), 9);
    for (let i = 0; i < 9; i++) {
      const stops = await rows
        .nth(i)
        .evaluate(
          (li) => [...li.querySelectorAll('a[href], button, input, select, textarea, [tabindex]')].filter((el) => el.getAttribute('tabindex') !== '-1').length,
        );
      assert.equal(stops, 1, `row ${i}`);
    }
    // The first stop of the page (the box already has the focus, so it is reached here directly).
    await page.locator('a[href]').first().focus();
    await settlesTo(
      page,
      () => page.evaluate<boolean>('document.activeElement?.textContent?.startsWith("Skip to") ?? false'),
      true,
      'the first stop is Skip to…',
    );
    await page.keyboard.press('Enter');
    await settlesTo(page, () => page.evaluate<string | undefined>('document.activeElement?.id'), 'message', 'Skip lands in the message box');

    bed.openai.enqueueStream({ chunks: Array.from({ length: 100 }, (_, i) => `e${i} `), delayMs: 80 });
    await page.keyboard.type('Go on');
    await page.keyboard.press('Enter');
    await assistant(page).getByText('e3', { exact: false }).waitFor();
    await page.keyboard.press('Escape');
    await assistant(page).getByText('Stopped').waitFor();
    await context.close();
  });
});

describe('defect 4: a phone', () => {
  test('issue 29 defect 4: at 390 px the conversation fits the screen with its box on it, and Keys, Accounts and Usage fit with their actions on screen', async () => {
    const { page, token, context } = await bed.signedIn('d4', { size: 'phone' });
    await withOpenAiKey(bed, token);
    assert.equal(
      (
        await bed.api(token, 'POST', '/api/accounts', {
          name: 'Swing account with a long name',
          currency: 'USD',
          timezone: 'America/New_York',
          startingBalance: '25000.12345678',
        })
      ).status,
      201,
    );
    assert.equal((await bed.api(token, 'PUT', '/api/advisor/market-data-key', { apiKey: bed.polygon.validKey })).status, 200);
    bed.openai.enqueueStream({ toolCalls: [{ name: 'get_quote', arguments: { symbol: 'AAPL' } }] });
    bed.openai.enqueueStream({
      chunks: [
        'A long word: supercalifragilisticexpialidocious_and_then_some_more_text_without_spaces.\n\n| Level | Price | Note |\n|---|---|---|\n| Support | 228.40 | the 50-day average |',
      ],
    });
    await ask(page, 'Hello from a phone');
    await replyDone(page);
    for (let i = 0; i < 4; i++) {
      bed.openai.enqueueStream({ chunks: [`Answer ${i}: ${'a fairly long paragraph of text '.repeat(8)}`] });
      await ask(page, `Question ${i}`);
      await replyDone(page);
    }
    // Open it again as a trader would: from the list.
    await page.goto('/chat');
    await page
      .getByRole('link', { name: 'Conversations' })
      .or(page.getByRole('button', { name: 'Conversations' }))
      .first()
      .click()
      .catch(() => undefined);
    await page.getByRole('link', { name: /Hello from a phone/ }).click();
    await replyDone(page);
    assert.equal(await sidewaysOverflow(page), 0, 'chat');
    const conversation = await box(page, '.conversation');
    assert.ok(conversation.width <= 390, `conversation ${conversation.width} px wide`);
    const message = await box(page, '#message');
    assert.ok(message.y >= 0 && message.y + message.height <= 844, `the box is at ${message.y}–${message.y + message.height} px`);
    await screenshot(page, 'd4-chat-phone');
    for (const [link, actions] of [
      ['Keys', ['Delete OpenAI key']],
      ['Accounts', ['Edit Swing account with a long name', 'Delete Swing account with a long name']],
      ['Usage', []],
    ] as const) {
      await page.getByRole('link', { name: link, exact: true }).click();
      await page.getByRole('heading', { level: 1, name: link }).waitFor();
      await page.waitForLoadState('networkidle');
      assert.equal(await sidewaysOverflow(page), 0, link);
      for (const name of actions) {
        const b = await page.getByRole('button', { name }).boundingBox();
        assert.ok(b && b.x >= 0 && b.x + b.width <= 390, `${link}: ${name} at ${JSON.stringify(b)}`);
      }
      await screenshot(page, `d4-${link.toLowerCase()}-phone`);
    }
    await context.close();
  });
});

describe('defect 5: forms', () => {
  test('issue 29 defect 5: the rename form shows Save whole, has Cancel, and Escape cancels back to the Rename button', async () => {
    const { page, token, context } = await bed.signedIn('d5a');
    await withOpenAiKey(bed, token);
    bed.openai.enqueueStream({ chunks: ['Sure.'] });
    await ask(page, 'A conversation to rename with a rather long first message');
    await replyDone(page);
    const rename = page.getByRole('button', { name: 'Rename', exact: true });
    await rename.click();
    const save = page.getByRole('button', { name: 'Save', exact: true });
    assert.equal(await save.innerText(), 'Save');
    assert.ok(await save.evaluate((b) => b.scrollWidth <= b.clientWidth), 'Save is not cut');
    await page.getByRole('button', { name: 'Cancel' }).click();
    await rename.click();
    await page.getByLabel('Title').fill('Changed my mind');
    await page.getByLabel('Title').press('Escape');
    await settlesTo(page, () => page.evaluate<string>('document.activeElement?.textContent?.trim() ?? ""'), 'Rename', 'Escape gives the focus back to Rename');
    assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'A conversation to rename with a rather long first message');
    await context.close();
  });

  test('issue 29 defect 5: the account form’s Save and Cancel do not touch, and a new account starts from the defaults, not the last one’s zone and brokerage', async () => {
    const { page, context } = await bed.signedIn('d5b', { timezoneId: 'Europe/Paris' });
    await page.getByRole('link', { name: 'Accounts' }).click();
    await page.getByLabel('New brokerage').fill('Saxo');
    await page.getByRole('button', { name: 'Add brokerage' }).click();
    const form = page.getByRole('form', { name: 'New account' });
    await form.getByLabel('Time zone').waitFor();
    assert.equal(await form.getByLabel('Time zone').inputValue(), 'Europe/Paris');
    await form.getByLabel('Name', { exact: true }).fill('First');
    await form.getByLabel('Time zone').fill('Asia/Tokyo');
    await form.getByLabel('Brokerage').selectOption({ label: 'Saxo' });
    await form.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('button', { name: 'Edit First' }).waitFor();
    assert.equal(await form.getByLabel('Time zone').inputValue(), 'Europe/Paris');
    assert.equal(await form.getByLabel('Brokerage').inputValue(), '');
    assert.equal(await form.getByLabel('Name', { exact: true }).inputValue(), '');
    await page.getByRole('button', { name: 'Edit First' }).click();
    const edit = page.getByRole('form', { name: 'Edit First' });
    const saveBox = await edit.getByRole('button', { name: 'Save changes' }).boundingBox();
    const cancelBox = await edit.getByRole('button', { name: 'Cancel' }).boundingBox();
    assert.ok(saveBox && cancelBox);
    const gap = cancelBox.x > saveBox.x ? cancelBox.x - (saveBox.x + saveBox.width) : saveBox.x - (cancelBox.x + cancelBox.width);
    assert.ok(gap >= 8 || cancelBox.y >= saveBox.y + saveBox.height + 8, `Save and Cancel ${gap} px apart`);
    await context.close();
  });
});

describe('defect 7: first steps', () => {
  test('issue 29 defect 7: sign-in has its field focused; an empty chat without a key says one is needed first; a refused key stays in its focused field; the market-data form names its provider', async () => {
    const context = await bed.browser.newContext({ baseURL: bed.origin });
    const page = await context.newPage();
    await page.goto('/');
    await page.getByLabel('User id').waitFor();
    await settlesTo(page, () => page.evaluate<string | null>('document.activeElement?.getAttribute("name") ?? null'), 'userId', 'sign-in opens on its field');
    await page.keyboard.type(`d7-${Date.now()}`);
    await page.keyboard.press('Enter');
    const welcome = page.getByRole('region', { name: 'Ask your advisor' });
    await welcome.getByText('add a language-model key first').waitFor();
    await welcome.getByRole('link', { name: 'Add a key' }).click();
    await page.waitForURL(/\/keys$/);
    const form = page.getByRole('form', { name: 'Add or replace a key' });
    await form.getByLabel('API key').fill('sk-wrong-key-000');
    await form.getByRole('button', { name: 'Verify and save' }).click();
    await form.getByRole('alert').filter({ hasText: 'The provider refused this key' }).waitFor();
    assert.equal(await form.getByLabel('API key').inputValue(), 'sk-wrong-key-000');
    await settlesTo(
      page,
      () => page.evaluate<string | null>('document.activeElement?.getAttribute("name") ?? null'),
      'apiKey',
      'a refused key keeps its field focused',
    );
    await page.getByRole('heading', { name: 'Market-data key (Polygon)' }).waitFor();
    await page.getByLabel('Polygon API key').waitFor();
    await context.close();
  });
});

describe('defect 8: money on screen', () => {
  test('issue 29 defect 8: replies show what they cost (allowance or credits), a stopped one too; free turns left beside the box; the Keys hint follows the typed model; packs say their name once with a price per credit; purchases name their pack and price', async () => {
    const { page, token, userId, context } = await bed.signedIn('d8');
    await withOpenAiKey(bed, token);
    await page.reload();
    const cost = page.getByTestId('model-cost');
    await cost.filter({ hasText: 'Free turn · 200 left' }).waitFor();
    bed.openai.enqueueStream({ chunks: ['Cheap.'] });
    await ask(page, 'On the allowance');
    await replyDone(page);
    await assistant(page).locator('.reply-footer', { hasText: '1 free turn' }).waitFor();
    await cost.filter({ hasText: 'Free turn · 199 left' }).waitFor();
    bed.openai.enqueueStream({ chunks: Array.from({ length: 100 }, (_, i) => `s${i} `), delayMs: 80 });
    await ask(page, 'Talk, then stop');
    await assistant(page).getByText('s2', { exact: false }).waitFor();
    await page.getByRole('button', { name: 'Stop' }).click();
    await assistant(page).locator('.reply-footer', { hasText: 'Stopped' }).filter({ hasText: '1 free turn' }).waitFor();

    // A credits model: the footer says the credits.
    await bed.t.deps.db
      .insertInto('ledger_entries')
      .values({
        id: crypto.randomUUID(),
        user_id: userId,
        amount: 50,
        kind: 'grant',
        reference: `grant:${crypto.randomUUID()}`,
        note: null,
        created_at: new Date(),
      })
      .execute();
    await bed.t.deps.db.updateTable('wallets').set({ balance: 50 }).where('user_id', '=', userId).execute();
    assert.equal((await bed.api(token, 'PATCH', '/api/advisor/provider-keys/openai', { defaultModel: 'gpt-4o' })).status, 200);
    await page.getByRole('link', { name: 'New conversation' }).click();
    bed.openai.enqueueStream({ chunks: ['Dear.'] });
    await ask(page, 'On credits');
    await replyDone(page);
    await assistant(page).locator('.reply-footer', { hasText: '5 credits' }).waitFor();

    await page.getByRole('link', { name: 'Keys' }).click();
    const editor = page.getByLabel('Default model for OpenAI');
    await editor.fill('gpt-4o-mini');
    await page
      .getByRole('row', { name: /OpenAI/ })
      .getByText('Free allowance turns')
      .waitFor();
    await editor.fill('gpt-4o');
    await page
      .getByRole('row', { name: /OpenAI/ })
      .getByText('5 credits per turn')
      .waitFor();

    await page.getByRole('link', { name: 'Credits' }).click();
    const size = page.getByRole('listitem').filter({ has: page.getByRole('heading', { name: '500 credits' }) });
    await size.getByText('$0.03 per credit').waitFor();
    const shown = (await size.locator(':scope > :not(button)').allInnerTexts()).join('\n');
    assert.equal(shown.match(/500 credits/g)?.length, 1, shown);
    await page
      .getByRole('listitem')
      .filter({ has: page.getByRole('heading', { name: 'Starter' }) })
      .getByText('$0.05 per credit')
      .waitFor();
    await page.getByRole('button', { name: 'Buy Starter' }).click();
    await page.waitForURL(/\/c\/pay\/cs_/);
    const sessionId = new URL(page.url()).pathname.split('/').at(-1) ?? '';
    const payload = JSON.stringify(makeStripeEvent('checkout.session.completed', bed.stripe.completeSession(sessionId)));
    await fetch(`${bed.origin}/api/billing/webhooks/stripe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': signStripePayload(payload, WEBHOOK_SECRET) },
      body: payload,
    });
    await page.goto('/billing');
    await page.getByRole('row', { name: /Purchase · Starter · \$5\.00 \+100/ }).waitFor();
    await screenshot(page, 'd8-billing');
    await context.close();
  });
});

describe('defect 9: charts and quotes', () => {
  test('issue 29 defect 9: the usage chart has dates along its axis, a y-axis, a lone day as a point (no ramp), and 7/30/90-day ranges', async () => {
    const { page, token, context } = await bed.signedIn('d9a');
    await withOpenAiKey(bed, token);
    bed.openai.enqueueStream({ chunks: ['One.'], usage: { input: 1200, output: 300 } });
    await ask(page, 'First');
    await replyDone(page);
    await page.getByRole('link', { name: 'Usage' }).click();
    const chart = page.locator('.usage-chart svg');
    await chart.waitFor();
    assert.ok((await chart.locator('.x-axis text').count()) >= 4, 'dates along the axis');
    assert.ok((await chart.locator('.y-axis text').count()) >= 3, 'a y-axis with its figures');
    assert.equal(await chart.locator('polyline').count(), 0, 'no line ramping up from zero to the one day');
    assert.equal(await chart.locator('.cost-point').count(), 1);
    await page.getByRole('button', { name: '7 days' }).click();
    await waitUntil(page, "document.querySelectorAll('.usage-chart rect.bar').length === 7");
    await page.getByRole('button', { name: '90 days' }).click();
    await waitUntil(page, "document.querySelectorAll('.usage-chart rect.bar').length === 90");
    await screenshot(page, 'd9-usage');
    await context.close();
  });

  test('issue 29 defect 9: a quote card shows its currency, the market’s session and the time on the exchange’s clock (not the browser’s)', async () => {
    const { page, token, context } = await bed.signedIn('d9b', { timezoneId: 'Asia/Tokyo' });
    await withOpenAiKey(bed, token);
    assert.equal((await bed.api(token, 'PUT', '/api/advisor/market-data-key', { apiKey: bed.polygon.validKey })).status, 200);
    bed.openai.enqueueStream({ toolCalls: [{ name: 'get_quote', arguments: { symbol: 'AAPL' } }] });
    bed.openai.enqueueStream({ chunks: ['Up a little.'] });
    await ask(page, 'AAPL?');
    await replyDone(page);
    const quote = page.locator('[data-tool=get_quote]');
    await quote.getByText('USD').waitFor();
    await quote.getByText('Market open').waitFor();
    const id = new URL(page.url()).pathname.split('/').at(-1) ?? '';
    const stored = (await (await bed.api(token, 'GET', `/api/advisor/conversations/${id}`)).json()) as {
      messages: { parts: { type: string; result?: { asOf?: string } }[] }[];
    };
    const asOf = stored.messages.at(-1)?.parts.find((p) => p.type === 'tool_result')?.result?.asOf ?? '';
    const newYork = new Intl.DateTimeFormat('en-US', { timeZone: 'America/New_York', hour: 'numeric', minute: '2-digit' }).format(new Date(asOf));
    await quote.getByText(`${newYork} New York time`, { exact: false }).waitFor();
    await context.close();
  });
});

describe('defect 10: brokerages', () => {
  test('issue 29 defect 10: a brokerage name the trader already has is refused in words, whatever its case', async () => {
    const { page, context } = await bed.signedIn('d10b');
    await page.getByRole('link', { name: 'Accounts' }).click();
    const field = page.getByLabel('New brokerage');
    await field.fill('Interactive Brokers');
    await page.getByRole('button', { name: 'Add brokerage' }).click();
    await page.getByRole('region', { name: 'Brokerages' }).getByText('Interactive Brokers').waitFor();
    await field.fill('interactive brokers ');
    await page.getByRole('button', { name: 'Add brokerage' }).click();
    await page
      .getByRole('region', { name: 'Brokerages' })
      .getByRole('alert')
      .filter({ hasText: 'You already have a brokerage named Interactive Brokers' })
      .waitFor();
    assert.equal(await page.getByRole('region', { name: 'Brokerages' }).getByRole('listitem').count(), 1);
    await context.close();
  });
});
