// Issue 38, the web client (DESIGN §18): a reply's figures on the page in real Chromium against the real
// service and the fakes — a figure copied from a get_quote result links to its card, one from the trader's
// own message is marked as such, an invented price is underlined and explained on keyboard focus (and to a
// screen reader), the line under the reply counts them; live, and again from the stored conversation;
// at a laptop's and a phone's width, axe clean.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { BrowserContext, Page } from 'playwright-core';
import { ask, assistant, axeViolations, replyDone, screenshot, settlesTo, sidewaysOverflow, startBed, withOpenAiKey, type Bed } from './harness.ts';

let bed: Bed;
before(async () => {
  bed = await startBed();
});
after(async () => {
  await bed.close();
});

const QUESTION = 'I hold 120 shares of AAPL. Where is it going?';
/** $232.80 is the fake's AAPL price (get_quote), 120 the trader's own, $260.00 invented; inside bold and a table. */
const REPLY = ['AAPL last traded at **$232.80**, so your 120 shares ', 'are worth watching.\n\n| Level | Price |\n|---|---|\n| Target | $260.00 |'];

/** The accessible description Chromium gives the element (what a screen reader announces after its name). */
async function accessibleDescription(context: BrowserContext, page: Page, selector: string): Promise<string | undefined> {
  const cdp = await context.newCDPSession(page);
  try {
    const { root } = await cdp.send('DOM.getDocument', { depth: 0 });
    const { nodeId } = await cdp.send('DOM.querySelector', { nodeId: root.nodeId, selector });
    const { nodes } = await cdp.send('Accessibility.getPartialAXTree', { nodeId, fetchRelatives: false });
    return nodes[0]?.description?.value as string | undefined;
  } finally {
    await cdp.detach();
  }
}

/** What the page shows of the last reply's figures: each one's kind and text, and the line under it. */
async function figuresShown(page: Page) {
  const reply = assistant(page);
  return {
    unmatched: await reply.locator('mark.figure.unmatched').allTextContents(),
    linked: await reply.locator('a.figure.sourced').allTextContents(),
    yours: await reply.locator('.figure.yours').allTextContents(),
    line: await reply.locator('.grounding-line').textContent(),
  };
}

const EXPECTED = {
  unmatched: ['$260.00'],
  linked: ['$232.80'],
  yours: ['120 (from your message)'],
  line: '2 of 3 figures from your data and quotes',
};

describe('issue 38: figures a trader can check (DESIGN §18)', () => {
  for (const size of ['desktop', 'phone'] as const) {
    test(`${size}: the invented price is underlined and explained on Tab, the quoted one links to its card, "2 of 3" under the reply, live and stored; axe 0`, async () => {
      const { page, token, context } = await bed.signedIn(`grounding-${size}`, { size });
      await withOpenAiKey(bed, token);
      assert.equal((await bed.api(token, 'PUT', '/api/advisor/market-data-key', { apiKey: bed.polygon.validKey })).status, 200);
      // A first turn makes the conversation; during the second, the conversation read again once the reply
      // has ended is held back: until it is let through, the page shows the live reply, marked from its
      // `done` frame alone.
      bed.openai.enqueueStream({ chunks: ['Hello.'] });
      await ask(page, 'Hello');
      await replyDone(page);
      let hold = false;
      let release = () => {};
      const released = new Promise<void>((resolve) => (release = resolve));
      let held = 0;
      await page.route(/\/api\/advisor\/conversations\/[^/?]+\?/, async (route) => {
        if (hold && route.request().method() === 'GET') {
          held++;
          await released;
        }
        await route.continue();
      });
      hold = true;
      bed.openai.enqueueStream({ toolCalls: [{ id: 'call_quote_aapl', name: 'get_quote', arguments: { symbol: 'AAPL' } }] });
      bed.openai.enqueueStream({ chunks: REPLY });
      await ask(page, QUESTION);
      const reply = assistant(page);
      await reply.locator('.grounding-line').waitFor();
      await settlesTo(page, async () => held, 1, 'the stored conversation is being read');
      assert.deepEqual(await figuresShown(page), EXPECTED, 'live, from done');
      release();
      hold = false;
      await settlesTo(page, figuresShown.bind(null, page), EXPECTED, 'the stored reply in its place');

      // The quoted price links to the card of the call it came from.
      const card = reply.locator('[data-tool=get_quote]');
      const cardId = await card.getAttribute('id');
      assert.ok(cardId, 'the card has an id');
      const link = reply.locator('a.figure.sourced');
      assert.equal(await link.getAttribute('href'), `#${cardId}`);
      assert.equal(await link.getAttribute('title'), 'From the Quote card');
      assert.equal(await reply.locator('.figure.yours a, a .figure.yours').count(), 0, 'the trader’s own figure is no link');

      // Keyboard only: from the quoted figure's link, Tab reaches the invented one; its explanation shows and is its description.
      const tip = reply.getByRole('tooltip');
      assert.equal(await tip.isVisible(), false, 'no explanation before focus');
      await link.focus();
      await page.keyboard.press('Tab');
      await settlesTo(
        page,
        () => page.evaluate<string>("document.activeElement?.matches('mark.figure.unmatched') ? document.activeElement.textContent : ''"),
        '$260.00',
      );
      await tip.waitFor({ state: 'visible' });
      assert.equal(await tip.textContent(), 'Not from your data or a quote');
      const mark = reply.locator('mark.figure.unmatched');
      assert.equal(await mark.getAttribute('aria-describedby'), await tip.getAttribute('id'));
      assert.equal(await accessibleDescription(context, page, '.message.assistant mark.figure.unmatched'), 'Not from your data or a quote');
      // The explanation sits under the figure, inside the window.
      const [at, box] = await Promise.all([mark.boundingBox(), tip.boundingBox()]);
      assert.ok(
        at && box && box.y >= at.y + at.height - 1 && box.x >= 0 && box.x + box.width <= (page.viewportSize()?.width ?? 0),
        JSON.stringify({ at, box }),
      );
      assert.equal(await sidewaysOverflow(page), 0);
      await screenshot(page, `grounding-${size}-focus`);
      assert.deepEqual(await axeViolations(page), [], 'with the explanation shown');
      await page.keyboard.press('Escape');
      await tip.waitFor({ state: 'hidden' });
      // And on hover.
      await mark.hover();
      await tip.waitFor({ state: 'visible' });
      await page.mouse.move(1, 1);
      await tip.waitFor({ state: 'hidden' });

      // Following the link brings the card into view, marked as the target.
      await link.click();
      await settlesTo(page, () => page.evaluate<string>('location.hash'), `#${cardId}`);
      await settlesTo(page, () => card.evaluate((el) => el.matches(':target')), true);
      assert.ok(await card.isVisible());

      // The stored conversation, read again after a reload, shows the same marks.
      await page.reload();
      await assistant(page).locator('.grounding-line').waitFor();
      assert.deepEqual(await figuresShown(page), EXPECTED, 'stored, with the conversation');
      assert.equal(await sidewaysOverflow(page), 0);
      await screenshot(page, `grounding-${size}-stored`);
      assert.deepEqual(await axeViolations(page), []);
      await context.close();
    });
  }

  test('a reply without figures has no line under it and no marks', async () => {
    const { page, token, context } = await bed.signedIn('grounding-none');
    await withOpenAiKey(bed, token);
    bed.openai.enqueueStream({ chunks: ['Keep your risk small and your stops honest.'] });
    await ask(page, 'Any advice?');
    await replyDone(page);
    const reply = assistant(page);
    assert.equal(await reply.locator('.grounding-line').count(), 0);
    assert.equal(await reply.locator('.figure').count(), 0);
    await context.close();
  });
});
