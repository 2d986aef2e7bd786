// Issue 39: the model picker walked with the keyboard — the select keeps the focus while each pick is
// stored, its options stay in one order, each model is priced by the service's own glob rule, and the
// stored default is the last model reached — in real Chromium, at 1280×800 and 390×844, axe at 0.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { axeViolations, screenshot, startBed, withOpenAiKey, type Bed } from './harness.ts';

let bed: Bed;
before(async () => {
  bed = await startBed();
});
after(async () => {
  await bed.close();
});

const MODELS = ['gpt-4o-mini', 'gpt-4o', 'o3-mini', 'o4-mini', 'gpt-4.1', 'gpt-4.1-mini'];
const COSTS = [
  'Free turn · 200 left',
  '5 credits a turn · you have 0',
  '2 credits a turn · you have 0',
  '2 credits a turn · you have 0',
  '3 credits a turn · you have 0',
  '3 credits a turn · you have 0',
];

const focusedLabel = (page: Page) => page.evaluate<string | null | undefined>("document.activeElement?.getAttribute('aria-label')");

describe('the model picker with the keyboard', () => {
  for (const size of ['desktop', 'phone'] as const) {
    test(`issue 39: ArrowDown visits every model in turn with the focus kept, the order never moves, the last one reached is stored (${size})`, async () => {
      const { page, token, context } = await bed.signedIn(`picker-keys-${size}`, { size });
      await withOpenAiKey(bed, token);
      await page.reload();
      const picker = page.getByRole('combobox', { name: 'Model' });
      const cost = page.getByTestId('model-cost');
      await cost.filter({ hasText: COSTS[0] }).waitFor();
      const order = () => picker.locator('option').evaluateAll((options) => options.map((o) => o.getAttribute('value') ?? ''));
      assert.deepEqual(
        await order(),
        MODELS.map((m) => `openai/${m}`),
      );
      await picker.focus();
      for (let i = 1; i < MODELS.length; i++) {
        await page.keyboard.press('ArrowDown');
        assert.equal(await picker.inputValue(), `openai/${MODELS[i]}`, `press ${i}`);
        await cost.filter({ hasText: COSTS[i] }).waitFor();
        // Long enough for the pick's PATCH and the keys read after it.
        await page.waitForTimeout(150);
        assert.equal(await focusedLabel(page), 'Model', `the focus stays on the picker after press ${i}`);
        assert.equal(await picker.isDisabled(), false);
        assert.deepEqual(
          await order(),
          MODELS.map((m) => `openai/${m}`),
          `the order after press ${i}`,
        );
      }
      await page.keyboard.press('ArrowUp');
      await page.keyboard.press('ArrowUp');
      await page.keyboard.press('ArrowUp');
      assert.equal(await picker.inputValue(), 'openai/o3-mini');
      const stored = async () =>
        ((await (await bed.api(token, 'GET', '/api/advisor/provider-keys')).json()) as { items: { defaultModel: string }[] }).items[0]?.defaultModel;
      for (let i = 0; i < 100 && (await stored()) !== 'o3-mini'; i++) await page.waitForTimeout(50);
      assert.equal(await stored(), 'o3-mini', 'the last model reached is the stored default');
      await page.waitForTimeout(200);
      assert.equal(await picker.inputValue(), 'openai/o3-mini', 'the keys read again do not move the picker back');
      assert.equal(await focusedLabel(page), 'Model');
      await cost.filter({ hasText: COSTS[2] }).waitFor();
      assert.deepEqual(await axeViolations(page), []);
      await screenshot(page, `model-picker-${size}`);
      await context.close();
    });
  }
});
