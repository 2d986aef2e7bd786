// Stage 3 of a turn, the start: reads, decision, reservation and storing in one statement, and the live
// turn that holds the lease from then on; or a replay of the stored reply (replay.ts).
import type { RawBuilder } from 'kysely';
import { findModel, type Provider } from '../../catalogue.ts';
import { FOREIGN_KEY_VIOLATION, UNIQUE_VIOLATION, isDatabaseUnavailable, pgErrorCode } from '../../db/create-db.ts';
import type { Deps } from '../../deps.ts';
import { AppError } from '../../http/errors.ts';
import type { UsableMarketDataKey } from '../advisor-keys/market-data-service.ts';
import { openTurnKeys, readTurnKeys, turnKeysPart, type TurnKeyRow, type TurnKeys, type UsableProviderKey } from '../advisor-keys/service.ts';
import { Toolbox } from '../advisor-tools/toolbox.ts';
import { refundCutTurn, type TurnCharge } from '../billing/turn-billing.ts';
import type { Trx } from '../../db/types.ts';
import { shuttingDown } from './admission.ts';
import { abandonTurn } from './crashed-turns.ts';
import { buildMessages, defaultTitle, systemPrompt } from './context.ts';
import { asProvider, type TurnRequest } from './input.ts';
import { streamInProgress } from './in-progress.ts';
import { LiveTurn, type RoundRequest } from './live-turn.ts';
import { priorReplay, turnToReplace, type Replay, type Replacing } from './replay.ts';
import * as repo from './repo.ts';
import * as statements from './turn-statements.ts';
import { traced } from '../../platform/tracing.ts';

/** How many times a turn's start reads the user's provider key again when it changed meanwhile. */
const KEY_READS = 3;
const NOT_NULL_VIOLATION = '23502';

/** Stage 3's answer: a live turn (and what its first round sends), or a replay. */
type Started = Replay | { readonly kind: 'live'; readonly live: LiveTurn; readonly request: RoundRequest };

/**
 * Reads, decision, reservation and storing in one statement (statements.startTurn: one round trip, one
 * commit), the checks in TURN_CHECKS' order: a refusal stores and reserves nothing. A message already
 * stored under this clientMessageId is replayed (or refused) by `priorReplay` — or, its reply cut by the
 * service (DESIGN §7), run again in the cut turn's place (`given`); a turn that `replaces`
 * the last one reads it first and starts in a transaction that drops it (`replacing`).
 */
export async function startTurn(deps: Deps, turn: TurnRequest, given?: Replacing): Promise<Started> {
  const { userId, target, input, claim, verdict } = turn;
  const { body, images } = input;
  const { replaces } = body;
  const replacing = given ?? (replaces === undefined ? undefined : await verdict.then(() => turnToReplace(deps, turn, replaces)));
  if (replacing?.kind === 'replay') return replacing;
  // Draining began while this request was being checked (admission saw it too late).
  if (deps.lifecycle.draining) throw shuttingDown();
  const start: statements.TurnStart = {
    now: deps.clock.now(),
    userId,
    target: target ?? undefined,
    conversationId: target ?? deps.ids.uuid(),
    title: defaultTitle(body.text),
    personaId: body.personaId,
    userMessage: { id: deps.ids.uuid(), content: body.text, clientMessageId: body.clientMessageId },
    replyId: deps.ids.uuid(),
    attachments: images.map((i) => ({ id: deps.ids.uuid(), format: i.format, data: i.data })),
    // Asked once the statement is built: building it overlaps the admission's round trip.
    admission: () => verdict.then(async () => ({ leaseHeld: await claim.held(), at: deps.clock.now() })),
    key: undefined,
    catalogue: catalogueOf(deps),
    historyBudget: deps.config.contextBudgetChars,
  };
  let row: statements.StartRow;
  let charge: TurnCharge | undefined;
  // The user's provider key as this instance last read it; one stored since is read and the start tried again.
  for (let attempt = 1; ; attempt++) {
    const key = deps.streams.knownKeys.get(userId) ?? (await readKey(deps, userId, target));
    try {
      ({ row, charge } = await traced(
        claim,
        'advisor.start_statement',
        deps.billing.reserveWithin({ turnId: start.replyId, userId, images: images.length, terms: statements.TERMS }, (db, reservation) => {
          const parts = { keys: turnKeysPart(userId), reservation };
          if (replacing === undefined) return statements.startTurn(db, { ...start, key }, parts);
          const titles = { replaced: defaultTitle(replacing.user.content), next: start.title };
          const { cutReplyId } = replacing;
          const giveBack = cutReplyId === undefined ? undefined : (trx: Trx) => refundCutTurn(deps, trx, cutReplyId);
          return statements.replaceAndStartTurn(db, replacing.user, titles, { ...start, key }, { ...parts, giveBack });
        }),
      ));
    } catch (err) {
      return await afterFailedStart(deps, err, turn, start.replyId);
    }
    if (row.refusal !== 'KEY_CHANGED') break;
    deps.streams.knownKeys.delete(userId);
    if (attempt === KEY_READS) throw new AppError('SERVICE_UNAVAILABLE', 'the provider key kept changing while the turn started; retry');
  }
  // One that vanished meanwhile (its conversation deleted) starts anew.
  if (row.refusal === 'CLIENT_MESSAGE_ID_SEEN') {
    const prior = await priorReplay(deps, turn);
    // DESIGN §7: a message whose reply the service cut runs again, in the cut turn's place.
    if (prior?.kind === 'replace' && given === undefined) return startTurn(deps, { ...turn, target: prior.conversationId }, prior);
    if (prior?.kind === 'replace') throw new Error('a cut turn was replaced and found again');
    return prior ?? startTurn(deps, turn);
  }
  const provider = row.provider === null ? undefined : asProvider(row.provider);
  const keys = openTurnKeys(deps, target === null ? null : (provider ?? null), keyRowsOf(userId, row));
  if (row.refusal !== null || charge === undefined || provider === undefined) throw refusal(row, keys);
  // The very bytes this instance opened (the statement compared them): they open again.
  if (keys.key instanceof AppError) throw new Error('a provider key that opened no longer opens');
  return { kind: 'live', ...(await liveTurn(deps, turn, start, { row, provider, key: keys.key, marketKey: keys.marketKey, charge })) };
}

/** The client's error for a start statement's refusal (StartRefusal). */
function refusal(row: statements.StartRow, keys: TurnKeys): AppError {
  const { provider, model } = row;
  switch (row.refusal) {
    case 'CONVERSATION_NOT_FOUND':
      return new AppError('CONVERSATION_NOT_FOUND', 'conversation not found');
    case 'PROVIDER_KEY_NOT_CONFIGURED':
    case 'PROVIDER_KEY_DECRYPTION_FAILED':
      if (keys.key instanceof AppError) return keys.key;
      break;
    case 'IMAGES_NOT_SUPPORTED':
      return new AppError('IMAGES_NOT_SUPPORTED', `${provider} model ${model} does not take images`);
    case 'STREAM_IN_PROGRESS':
      // The admission did not get the lease: another stream of the user holds it (a store that failed was a 503 already).
      return streamInProgress('user');
    case 'MODEL_NOT_AVAILABLE':
      return new AppError('MODEL_NOT_AVAILABLE', `model ${model} of ${provider} is not available`);
    default:
      break;
  }
  throw new Error(`the turn statement answered refusal ${String(row.refusal)} with source ${String(row.source)}`);
}

/** The catalogue's models as the start statement reads them, built once per configuration. */
const catalogues = new WeakMap<object, RawBuilder<unknown>>();
function catalogueOf(deps: Deps): RawBuilder<unknown> {
  const { catalogue } = deps.config;
  let rows = catalogues.get(catalogue);
  if (rows === undefined) catalogues.set(catalogue, (rows = statements.catalogueRows(catalogue.models)));
  return rows;
}

/** The key rows of a start statement's answer, as the keys feature reads them. */
function keyRowsOf(userId: string, row: statements.StartRow): TurnKeyRow[] {
  const rows: TurnKeyRow[] = [];
  const sealed = (keyId: string | null, nonce: Uint8Array | null, ciphertext: Uint8Array | null, tag: Uint8Array | null) =>
    keyId === null || nonce === null || ciphertext === null || tag === null ? undefined : { key_id: keyId, nonce, ciphertext, tag };
  const p = sealed(row.p_key_id, row.p_nonce, row.p_ciphertext, row.p_tag);
  if (p && row.provider !== null) rows.push({ kind: 'provider', user_id: userId, provider: row.provider, default_model: row.p_default_model, ...p });
  const m = sealed(row.m_key_id, row.m_nonce, row.m_ciphertext, row.m_tag);
  if (m && row.m_provider !== null) rows.push({ kind: 'market', user_id: userId, provider: row.m_provider, default_model: null, ...m });
  return rows;
}

/** Reads and opens the user's provider key (the conversation's provider's, or the active one), and remembers it as read. */
async function readKey(deps: Deps, userId: string, target: string | null): Promise<statements.TurnStart['key']> {
  const rows = await readTurnKeys(deps, userId, target === null ? null : repo.conversationProvider(userId, target));
  const row = rows.find((r) => r.kind === 'provider');
  if (row === undefined) return undefined;
  // Copies of their own: the driver's buffers are slices of 8 KiB slabs, and one kept per user would keep its slab.
  const sealed = { key_id: row.key_id, nonce: new Uint8Array(row.nonce), ciphertext: new Uint8Array(row.ciphertext), tag: new Uint8Array(row.tag) };
  const known = { sealed, opens: !(openTurnKeys(deps, null, [row]).key instanceof AppError) };
  deps.streams.knownKeys.set(userId, known);
  return known;
}

/** What the start statement answered for a turn that starts. */
interface StartedRow {
  readonly row: statements.StartRow;
  readonly provider: Provider;
  readonly key: UsableProviderKey;
  readonly marketKey: UsableMarketDataKey | undefined;
  readonly charge: TurnCharge;
}

/** Stage 3's end: the live turn (holding the lease from now on) and its first round's request. */
async function liveTurn(deps: Deps, turn: TurnRequest, start: statements.TurnStart, s: StartedRow): Promise<{ live: LiveTurn; request: RoundRequest }> {
  const { userId, input, claim } = turn;
  const { row, provider, key, charge } = s;
  const model = row.model ?? key.model;
  const entry = findModel(deps.config.catalogue, provider, model);
  const toolbox = new Toolbox(deps, userId, s.marketKey, entry?.tools !== false && deps.config.advisorMaxToolCalls > 0);
  const system = systemPrompt(deps.config.catalogue, row.persona_id, toolbox.offered, start.now);
  const request: RoundRequest = { system, messages: buildMessages(row.history, input.body.text, input.images), tools: toolbox.offered };
  const live = new LiveTurn(deps, {
    conversationId: start.conversationId,
    userMessageId: start.userMessage.id,
    assistantMessageId: start.replyId,
    provider,
    model,
    billing: { source: charge.source, credits: charge.credits },
    userId,
    leaseToken: await claim.handOver(),
    userText: input.body.text,
    key,
    charge,
    toolbox,
    pricing: entry?.pricing,
    log: turn.log,
  });
  return { live, request };
}

/**
 * A start statement that failed: a replay when it lost a race with a concurrent duplicate (the
 * unique index decided), else the error the client gets. One that failed on the connection may have
 * committed all the same: its turn is settled by what it stored.
 */
async function afterFailedStart(deps: Deps, err: unknown, turn: TurnRequest, turnId: string): Promise<Replay> {
  const { target } = turn;
  if ((err instanceof AppError && err.code === 'BILLING_NOT_AVAILABLE') || isDatabaseUnavailable(err)) abandonTurn(deps, turnId);
  const code = pgErrorCode(err);
  if (code === UNIQUE_VIOLATION) {
    // A concurrent duplicate stored it first: its replay (a turn that just started is not a cut one).
    const replayed = await priorReplay(deps, turn);
    if (replayed?.kind === 'replay') return replayed;
    throw streamInProgress('conversation');
  }
  // The conversation was deleted meanwhile.
  if ((code === NOT_NULL_VIOLATION || code === FOREIGN_KEY_VIOLATION) && target !== null) {
    throw new AppError('CONVERSATION_NOT_FOUND', 'conversation not found');
  }
  throw err;
}
