// The web client's test bed: the real service (in this process, embedded database, local sign-in on, as
// `npm start` runs it) on a loopback port, the project's fakes for the outside systems, and Debian's
// Chromium driven by Playwright. Screenshots and figures go to test-results/web/.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import assert from 'node:assert/strict';
import os from 'node:os';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { AxeBuilder } from '@axe-core/playwright';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { unusedPort } from '../helpers/net.ts';
import {
  startOpenAiCompatibleFake,
  startPolygonFake,
  startStripeFake,
  type MarketDataFake,
  type OpenAiCompatibleFake,
  type StripeFake,
} from '../fakes/index.ts';

export const ARTEFACTS = path.resolve(import.meta.dirname, '../../test-results/web');
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const WEBHOOK_SECRET = 'whsec_web_client_tests';

/** Allowance models (free turns) and a credits model, as a trader would meet them. */
export const WEB_CATALOGUE = {
  creditPacks: [
    { packId: 'starter', name: 'Starter', credits: 100, amount: 500, currency: 'usd' },
    { packId: 'trader', name: 'Trader', credits: 1000, amount: 4000, currency: 'usd' },
    // Named by its size, as packs often are: its card must not say it twice.
    { packId: 'p500', name: '500 credits', credits: 500, amount: 1500, currency: 'usd' },
  ],
  tiers: { free: { monthlyAllowanceTurns: 200, monthlyImages: 20 } },
  defaultTier: 'free',
  models: [
    { provider: 'openai', match: 'gpt-4o-mini', allowance: true, creditsPerTurn: 1, pricing: { inputPerMTok: 0.15, outputPerMTok: 0.6 } },
    { provider: 'openai', match: 'gpt-4o', allowance: false, creditsPerTurn: 5 },
    // Patterns with `*` inside and at the end: the page prices them by the service's own rule.
    { provider: 'openai', match: 'o*-mini', allowance: false, creditsPerTurn: 2 },
    { provider: 'openai', match: 'gpt-4.1*', allowance: false, creditsPerTurn: 3 },
  ],
  providerDefaults: { openai: ['gpt-4o-mini', 'gpt-4o', 'o3-mini', 'o4-mini', 'gpt-4.1', 'gpt-4.1-mini'] },
  personas: [
    { personaId: 'coach', name: 'Trading coach', systemPrompt: 'Be a coach.' },
    { personaId: 'risk', name: 'Risk manager', systemPrompt: 'Be strict.' },
  ],
};

/** The window a trader uses: a laptop (1280×800, the default) or a phone (390×844); light or dark; a time zone. */
export interface ContextOptions {
  readonly size?: 'desktop' | 'phone';
  readonly colorScheme?: 'light' | 'dark';
  readonly timezoneId?: string;
  /** Where the page is opened (default the bed's own 127.0.0.1 origin). */
  readonly origin?: string;
}

export const SIZES = { desktop: { width: 1280, height: 800 }, phone: { width: 390, height: 844 } } as const;

export interface Bed {
  readonly origin: string;
  readonly t: TestApp;
  readonly openai: OpenAiCompatibleFake;
  readonly polygon: MarketDataFake;
  readonly stripe: StripeFake;
  readonly browser: Browser;
  /** A new browser context (its own storage), signed in as a new user through the local sign-in page. */
  signedIn(tag: string, opts?: ContextOptions): Promise<{ page: Page; context: BrowserContext; userId: string; token: string }>;
  /** The API as that user would call it (arrange a state without clicking through it). */
  api(token: string, method: string, url: string, body?: unknown): Promise<{ status: number; json: () => Promise<unknown> }>;
  close(): Promise<void>;
}

export async function startBed(): Promise<Bed> {
  const [openai, polygon, stripe] = await Promise.all([startOpenAiCompatibleFake({ flavor: 'openai' }), startPolygonFake(), startStripeFake()]);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'advisor-web-'));
  const catalogueFile = path.join(dir, 'catalogue.json');
  writeFileSync(catalogueFile, JSON.stringify(WEB_CATALOGUE));
  const port = await unusedPort();
  const origin = `http://127.0.0.1:${port}`;
  const t = await buildTestApp({
    env: {
      // The embedded default: generated secret, no database URL → local sign-in is offered.
      AUTH_JWT_SECRET: undefined,
      DATABASE_URL: undefined,
      REDIS_URL: undefined,
      HOST: '127.0.0.1',
      PORT: String(port),
      CONFIG_FILE: catalogueFile,
      OPENAI_BASE_URL: openai.url,
      MARKET_DATA_BASE_URL: polygon.url,
      STRIPE_SECRET_KEY: stripe.validKey,
      STRIPE_API_BASE: stripe.url,
      STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
      // The checkout URLs are left to their default, as `npm start` leaves them.
      STREAM_HEARTBEAT_MS: '1000',
    },
  });
  await t.app.listen({ port, host: '127.0.0.1' });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // As the machine's probe starts it: no sandbox as root, and no calls to Google's hosts (closed network).
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  mkdirSync(ARTEFACTS, { recursive: true });
  let n = 0;
  const bed: Bed = {
    origin,
    t,
    openai,
    polygon,
    stripe,
    browser,
    async signedIn(tag, opts = {}) {
      const context = await browser.newContext({
        baseURL: opts.origin ?? origin,
        viewport: SIZES[opts.size ?? 'desktop'],
        colorScheme: opts.colorScheme ?? 'light',
        ...(opts.timezoneId ? { timezoneId: opts.timezoneId } : {}),
      });
      const page = await context.newPage();
      const userId = `${tag}-${++n}-${Date.now().toString(36)}`;
      await page.goto('/');
      await page.getByLabel('User id').fill(userId);
      await page.getByRole('button', { name: 'Sign in', exact: true }).click();
      await page.getByRole('navigation', { name: 'Main' }).waitFor();
      const token = await page.evaluate<string>("sessionStorage.getItem('advisor.session') ?? ''");
      return { page, context, userId, token };
    },
    async api(token, method, url, body) {
      const res = await fetch(`${origin}${url}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const text = await res.text();
      return { status: res.status, json: async () => (text ? JSON.parse(text) : undefined) };
    },
    async close() {
      await browser.close();
      await t.close();
      await Promise.all([openai.close(), polygon.close(), stripe.close()]);
    },
  };
  return bed;
}

/** The message box, the last reply, sending a message with Enter, and a reply stored and drawn (its footer shows the tokens). */
export const composer = (page: Page) => page.getByLabel('Message', { exact: true });
export const assistant = (page: Page) => page.locator('.message.assistant').last();
export async function ask(page: Page, text: string): Promise<void> {
  await composer(page).fill(text);
  await composer(page).press('Enter');
}
export const replyDone = (page: Page) => assistant(page).locator('.reply-footer', { hasText: 'tokens' }).waitFor();

/** A full-page screenshot kept as a test artefact. */
export async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(ARTEFACTS, `${name}.png`), fullPage: true });
}

/** axe-core's WCAG 2.1 A/AA and best-practice rules on the page as it is: every violation, whatever its impact. */
export async function axeViolations(page: Page): Promise<string[]> {
  const result = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']).analyze();
  return result.violations.map(
    (v) =>
      `${v.id} (${v.impact}): ${v.help} — ${v.nodes
        .map((n) => n.target.join(' '))
        .slice(0, 3)
        .join(', ')}`,
  );
}

/**
 * Waits until `expression` (evaluated in the page) is true. page.waitForFunction compiles a string with
 * `new Function`, which the page's CSP refuses (no 'unsafe-eval'); page.evaluate does not.
 */
export async function waitUntil(page: Page, expression: string, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await page.evaluate<boolean>(expression))) {
    if (Date.now() > until) throw new Error(`still false after ${timeoutMs} ms: ${expression}`);
    await page.waitForTimeout(50);
  }
}

/**
 * Reads `read` until it gives `expected` (deep-equal) or `timeoutMs` passes, then asserts on the last
 * reading, so a failure says what was there instead. For what the page settles to after an action — the
 * focus given back in an effect after the re-render that detached a form — which one read right after the
 * action can see before it happens.
 */
export async function settlesTo<T>(page: Page, read: () => Promise<T>, expected: T, message?: string, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  let last = await read();
  while (!isDeepStrictEqual(last, expected) && Date.now() < until) {
    await page.waitForTimeout(50);
    last = await read();
  }
  assert.deepEqual(last, expected, message);
}

/** How far the page scrolls sideways (0: it fits its window). */
export function sidewaysOverflow(page: Page): Promise<number> {
  return page.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth');
}

/** Saves a verified OpenAI key for the signed-in user through the API (the Keys journey clicks it). */
export async function withOpenAiKey(bed: Bed, token: string, defaultModel = 'gpt-4o-mini'): Promise<void> {
  const res = await bed.api(token, 'PUT', '/api/advisor/provider-keys/openai', { apiKey: bed.openai.validKey, defaultModel });
  if (res.status !== 200) throw new Error(`saving the key answered ${res.status}: ${JSON.stringify(await res.json())}`);
}
