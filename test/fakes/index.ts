// Loopback fakes of the outside systems the service talks to; see each file for its wire format.
export type { FakeHandler, FakeServer, KeyRing, ProbeBehaviour, RecordedRequest } from './http-fake.ts';
export { bearer, isRecord, keyRing, maskKey, probeStatus, randomId, sendJson, sleep, startFake } from './http-fake.ts';
export type { FinishReason, ScriptedCall, StreamRecord, StreamScript } from './stream-script.ts';
export type { OpenAiCompatibleFake, OpenAiCompatibleFakeOptions, OpenAiFlavor } from './openai-compatible.ts';
export { startOpenAiCompatibleFake } from './openai-compatible.ts';
export type { AnthropicFake, AnthropicFakeOptions } from './anthropic.ts';
export { startAnthropicFake } from './anthropic.ts';
export type { GeminiFake, GeminiFakeOptions } from './gemini.ts';
export { startGeminiFake } from './gemini.ts';
export type { MarketBehaviour, MarketDataFake } from './market-data.ts';
export { MARKET_FIXTURES, startFmpFake, startPolygonFake } from './market-data.ts';
export type { CheckoutRecord, StripeFake, StripeFakeOptions, StripeSession } from './stripe.ts';
export { makeStripeDispute, makeStripeEvent, makeStripeThinEvent, parseStripeForm, signStripePayload, startStripeFake } from './stripe.ts';
