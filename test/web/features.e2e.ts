// Issue 29: the chat features people expect (copy, regenerate, edit and resend, a model picker with
// its cost, search, a list by date, export), and the layout: every page at 1280×800 and 390×844, light
// and dark, no sideways scroll, axe at 0 violations — in real Chromium against the real service.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';
import {
  ask,
  assistant,
  axeViolations,
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

const conversationId = (page: Page) => new URL(page.url()).pathname.split('/').at(-1) ?? '';
type Stored = { title: string; messages: { role: string; text: string }[] };

describe('messages', () => {
  test('issue 29: Copy puts a message’s Markdown on the clipboard, the trader’s and the advisor’s', async () => {
    const { page, token, context } = await bed.signedIn('copy');
    await context.grantPermissions(['clipboard-read', 'clipboard-write']);
    await withOpenAiKey(bed, token);
    bed.openai.enqueueStream({ chunks: ['Keep **risk** at `1R`:\n\n- stop below the low'] });
    await ask(page, 'How much risk?');
    await replyDone(page);
    await assistant(page).getByRole('button', { name: 'Copy' }).click();
    assert.equal(await page.evaluate<string>('navigator.clipboard.readText()'), 'Keep **risk** at `1R`:\n\n- stop below the low');
    await assistant(page).getByText('Copied').waitFor();
    await page.locator('.message.user').last().getByRole('button', { name: 'Copy' }).click();
    assert.equal(await page.evaluate<string>('navigator.clipboard.readText()'), 'How much risk?');
    await context.close();
  });

  test('issue 29: Regenerate replaces the last reply with a new one; the model does not see the old one', async () => {
    const { page, token, context } = await bed.signedIn('regenerate');
    await withOpenAiKey(bed, token);
    bed.openai.enqueueStream({ chunks: ['A first take.'] });
    await ask(page, 'Is it a breakout?');
    await replyDone(page);
    bed.openai.enqueueStream({ chunks: ['A second take.'] });
    await assistant(page).getByRole('button', { name: 'Regenerate' }).click();
    await assistant(page).getByText('A second take.').waitFor();
    await replyDone(page);
    assert.equal(await page.getByText('A first take.').count(), 0);
    assert.equal(await page.locator('.message.user').count(), 1);
    const sent = JSON.stringify(bed.openai.streams.at(-1)?.request.json);
    assert.ok(!sent.includes('A first take.'), 'the replaced reply is not in the context');
    const stored = (await (await bed.api(token, 'GET', `/api/advisor/conversations/${conversationId(page)}`)).json()) as Stored;
    assert.deepEqual(
      stored.messages.map((m) => m.text),
      ['Is it a breakout?', 'A second take.'],
    );
    await context.close();
  });

  test('issue 29: Edit resends the last message with new text; its old reply goes with it', async () => {
    const { page, token, context } = await bed.signedIn('edit');
    await withOpenAiKey(bed, token);
    bed.openai.enqueueStream({ chunks: ['About TSLA.'] });
    await ask(page, 'What about TSLA?');
    await replyDone(page);
    const last = page.locator('.message.user').last();
    await last.getByRole('button', { name: 'Edit' }).click();
    const editor = page.getByLabel('Edit your message');
    await settlesTo(page, () => page.evaluate<string | null>('document.activeElement?.getAttribute("aria-label") ?? null'), 'Edit your message');
    await editor.fill('What about NVDA?');
    bed.openai.enqueueStream({ chunks: ['About NVDA.'] });
    await page.getByRole('button', { name: 'Send edited message' }).click();
    await assistant(page).getByText('About NVDA.').waitFor();
    await replyDone(page);
    assert.deepEqual(await page.locator('.message.user .text').allInnerTexts(), ['What about NVDA?']);
    assert.equal(await page.getByText('About TSLA.').count(), 0);
    // Escape leaves an edit without sending it.
    await page.locator('.message.user').last().getByRole('button', { name: 'Edit' }).click();
    await page.getByLabel('Edit your message').press('Escape');
    await page.getByLabel('Edit your message').waitFor({ state: 'detached' });
    await context.close();
  });

  test('issue 29: Export downloads the conversation as Markdown: its text, its tool calls as readable blocks, and what each reply used', async () => {
    const { page, token, context } = await bed.signedIn('export');
    await withOpenAiKey(bed, token);
    assert.equal(
      (await bed.api(token, 'POST', '/api/accounts', { name: 'Swing', currency: 'USD', timezone: 'America/New_York', startingBalance: '25000' })).status,
      201,
    );
    bed.openai.enqueueStream({ toolCalls: [{ name: 'list_my_accounts', arguments: {} }] });
    bed.openai.enqueueStream({ chunks: ['You have **one** account.'], usage: { input: 1200, output: 300 } });
    await ask(page, 'Which accounts do I have?');
    await replyDone(page);
    const download = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Export' }).click();
    const file = await download;
    assert.match(file.suggestedFilename(), /^which-accounts-do-i-have.*\.md$/);
    const text = readFileSync((await file.path()) ?? '', 'utf8');
    assert.match(text, /^# Which accounts do I have\?\n/);
    assert.match(text, /## You\n\nWhich accounts do I have\?/);
    assert.match(text, /## Advisor\n/);
    assert.match(text, /Tool call: `list_my_accounts`/);
    assert.match(text, /```json\n[\s\S]*"name": "Swing"[\s\S]*\n```/);
    assert.match(text, /You have \*\*one\*\* account\./);
    // Both rounds of the turn (the tool round and the answer) are summed (DESIGN §13).
    assert.match(text, /1,210 tokens in · 301 out/);
    assert.match(text, /gpt-4o-mini/);
    await context.close();
  });
});

describe('the model and its cost', () => {
  test('issue 29: a model picker beside the box lists the key’s models with what each costs; switching sets the key’s default model; a conversation shows its own model', async () => {
    const { page, token, context } = await bed.signedIn('picker');
    await withOpenAiKey(bed, token);
    await page.reload();
    const picker = page.getByRole('combobox', { name: 'Model' });
    await picker.waitFor();
    const options = await picker.locator('option').allInnerTexts();
    assert.ok(options.some((o) => o.includes('gpt-4o-mini')) && options.some((o) => o.includes('gpt-4o') && !o.includes('mini')), options.join(', '));
    const cost = page.getByTestId('model-cost');
    await cost.filter({ hasText: 'Free turn · 200 left' }).waitFor();
    // The cost line follows the picker at once; the key's new default is stored by the PATCH it sends.
    const stored = (): Promise<unknown> =>
      page.waitForResponse((r) => r.request().method() === 'PATCH' && r.url().includes('/api/advisor/provider-keys/') && r.ok());
    let patched = stored();
    await picker.selectOption({ value: 'openai/gpt-4o' });
    await cost.filter({ hasText: '5 credits a turn · you have 0' }).waitFor();
    await patched;
    const keys = (await (await bed.api(token, 'GET', '/api/advisor/provider-keys')).json()) as { items: { defaultModel: string }[] };
    assert.equal(keys.items[0]?.defaultModel, 'gpt-4o');
    patched = stored();
    await picker.selectOption({ value: 'openai/gpt-4o-mini' });
    await cost.filter({ hasText: 'Free turn · 200 left' }).waitFor();
    await patched;
    bed.openai.enqueueStream({ chunks: ['Fine.'] });
    await ask(page, 'On mini');
    await replyDone(page);
    await cost.filter({ hasText: 'Free turn · 199 left' }).waitFor();
    assert.equal(await page.getByRole('combobox', { name: 'Model' }).isDisabled(), true, 'a conversation keeps its model');
    await context.close();
  });
});

describe('the list', () => {
  test('issue 29: the search box finds conversations by the words of their messages; clearing it shows them all again', async () => {
    const { page, token, context } = await bed.signedIn('search');
    await withOpenAiKey(bed, token);
    for (const [q, a] of [
      ['Should I hold through earnings?', 'Trim before the report.'],
      ['Where is my stop?', 'Below the swing low.'],
      ['Covered calls?', 'Sell against shares you own.'],
    ]) {
      bed.openai.enqueueStream({ chunks: [a ?? ''] });
      const r = await bed.api(token, 'POST', '/api/advisor/conversations/new/messages/stream', { text: q, clientMessageId: crypto.randomUUID() });
      await r.json().catch(() => undefined);
    }
    await page.reload();
    const list = page.getByRole('navigation', { name: 'Conversations' });
    await list.getByRole('link', { name: /Covered calls/ }).waitFor();
    await list.getByRole('searchbox', { name: 'Search conversations' }).fill('swing');
    await list.getByRole('link', { name: /Where is my stop/ }).waitFor();
    await waitUntil(page, "document.querySelectorAll('nav[aria-label=Conversations] li').length === 1");
    await list.getByRole('searchbox', { name: 'Search conversations' }).fill('nothing like this');
    await list.getByText('No conversation holds these words.').waitFor();
    await list.getByRole('searchbox', { name: 'Search conversations' }).fill('');
    await waitUntil(page, "document.querySelectorAll('nav[aria-label=Conversations] li').length === 3");
    await context.close();
  });

  test('issue 29: the list is grouped by date: today, yesterday, the last 7 days, older', async () => {
    const { page, token, userId, context } = await bed.signedIn('groups');
    await withOpenAiKey(bed, token);
    const ages = [0, 1, 3, 40];
    for (const days of ages) {
      bed.openai.enqueueStream({ chunks: ['Ok.'] });
      const r = await bed.api(token, 'POST', '/api/advisor/conversations/new/messages/stream', {
        text: `${days} days old`,
        clientMessageId: crypto.randomUUID(),
      });
      await r.json().catch(() => undefined);
      // Noon of that day, local to the browser (UTC here), so the group does not depend on the hour the test runs.
      const noon = new Date();
      noon.setUTCHours(12, 0, 0, 0);
      const at = new Date(noon.getTime() - days * 86_400_000);
      if (days > 0)
        await bed.t.deps.db
          .updateTable('conversations')
          .set({ updated_at: at, last_message_at: at })
          .where('user_id', '=', userId)
          .where('title', '=', `${days} days old`)
          .execute();
    }
    await page.reload();
    const list = page.getByRole('navigation', { name: 'Conversations' });
    await list.getByRole('link', { name: /40 days old/ }).waitFor();
    const groups = await list
      .locator('section')
      .evaluateAll((sections) =>
        sections.map((s) => [s.querySelector('h2')?.textContent ?? '', [...s.querySelectorAll('li .title')].map((t) => t.textContent ?? '')]),
      );
    assert.deepEqual(groups, [
      ['Today', ['0 days old']],
      ['Yesterday', ['1 days old']],
      ['Last 7 days', ['3 days old']],
      ['Older', ['40 days old']],
    ]);
    await context.close();
  });
});

describe('layout', () => {
  /** Every page as a trader reaches it, with something on it. */
  function visit(page: Page): [string, () => Promise<void>][] {
    return [
      ['chat', async () => void (await page.goto('/chat'), await composer(page).waitFor())],
      [
        'conversation',
        async () => {
          await page.goto('/chat');
          await composer(page).waitFor();
          // On a phone the list is a panel the conversation's button opens.
          const toggle = page.getByRole('button', { name: 'Conversations' });
          if (await toggle.isVisible()) await toggle.click();
          await page.locator('nav[aria-label=Conversations] li a').first().click();
          await replyDone(page);
          await page.locator('[data-tool=get_quote]').waitFor();
        },
      ],
      ['keys', async () => void (await page.goto('/keys'), await page.getByRole('row', { name: /OpenAI/ }).waitFor())],
      [
        'accounts',
        async () =>
          void (
            await page.goto('/accounts'),
            await page
              .getByRole('button', { name: /^Edit / })
              .first()
              .waitFor()
          ),
      ],
      ['billing', async () => void (await page.goto('/billing'), await page.getByRole('button', { name: 'Buy Starter' }).waitFor())],
      [
        'billing-success',
        async () => void (await page.goto('/billing/success?session_id=cs_test_unknown'), await page.getByRole('heading', { level: 1 }).waitFor()),
      ],
      ['billing-cancel', async () => void (await page.goto('/billing/cancel'), await page.getByText('Nothing was charged.').waitFor())],
      ['usage', async () => void (await page.goto('/usage'), await page.locator('.usage-chart svg').waitFor())],
      ['sign-in', async () => void (await page.evaluate('sessionStorage.clear()'), await page.goto('/'), await page.getByLabel('User id').waitFor())],
    ];
  }

  for (const size of ['desktop', 'phone'] as const) {
    for (const colorScheme of ['light', 'dark'] as const) {
      test(`issue 29: every page at ${size === 'desktop' ? '1280×800' : '390×844'} in ${colorScheme}: nothing scrolls sideways and axe finds no violation`, async () => {
        const { page, token, context } = await bed.signedIn(`layout-${size}-${colorScheme}`, { size, colorScheme });
        await withOpenAiKey(bed, token);
        assert.equal((await bed.api(token, 'PUT', '/api/advisor/market-data-key', { apiKey: bed.polygon.validKey })).status, 200);
        assert.equal(
          (
            await bed.api(token, 'POST', '/api/accounts', {
              name: 'Swing trading account',
              currency: 'USD',
              timezone: 'America/New_York',
              startingBalance: '25000',
            })
          ).status,
          201,
        );
        bed.openai.enqueueStream({ toolCalls: [{ name: 'get_quote', arguments: { symbol: 'AAPL' } }] });
        bed.openai.enqueueStream({ chunks: ['AAPL is **up** today.\n\n| Level | Price |\n|---|---|\n| Support | 228.40 |'] });
        const r = await bed.api(token, 'POST', '/api/advisor/conversations/new/messages/stream', {
          text: 'How is AAPL doing today compared with its support?',
          clientMessageId: crypto.randomUUID(),
        });
        await r.json().catch(() => undefined);
        const problems: string[] = [];
        for (const [name, open] of visit(page)) {
          await open();
          await page.waitForLoadState('networkidle');
          const overflow = await sidewaysOverflow(page);
          if (overflow > 0) problems.push(`${name}: scrolls ${overflow} px sideways`);
          for (const v of await axeViolations(page)) problems.push(`${name}: ${v}`);
          await screenshot(page, `${name}-${size}-${colorScheme}`);
        }
        assert.deepEqual(problems, []);
        await context.close();
      });
    }
  }
});
