// Process entry: the floor of an advisor turn on this machine. A bare node:http server that does
// only what the rules make every turn do, in the order they fix it, through the service's own stores
// and rule code — and nothing else: no Fastify (routing, hooks, schema validation, content-type
// parsing), no request logging, no metrics, no live-turn machinery (tickers, grace, drain, stop),
// no parts log. What the service does beyond it is its own cost; what this costs, no implementation
// of the same rules on the same stores avoids.
//   Every turn, in order: the token (verified tokens remembered, as the service does); the rate-limit
//   verdict and the stream lease (one Redis script, asked before the body is read); the body; the
//   reads, the decision, the reservation and the turn's rows in one statement with its commit (the
//   user's provider key as last read, compared there byte for byte, then decrypted); the provider call
//   with the service's request (system prompt, tools, message) and its stream translated into frames; every frame into the turn's shared log (DESIGN §12) and to the client from it; the
//   reply stored and the charge settled in one statement with its commit; the lease released; the
//   terminal frame.
// Same environment as the service (DATABASE_URL, REDIS_URL, AUTH_JWT_SECRET, ENCRYPTION_KEYS,
// OPENAI_BASE_URL, DATA_DIR); it runs on the service's migrated database.
import http from 'node:http';
import { loadConfig } from '../../src/config.ts';
import { createDeps } from '../../src/deps.ts';
import { bearerToken } from '../../src/http/auth.ts';
import { SseWriter } from '../../src/http/sse.ts';
import type { RateLimitRule } from '../../src/platform/rate-limiter.ts';
import { findModel } from '../../src/catalogue.ts';
import { openTurnKeys, readTurnKeys, turnKeysPart, type TurnKeyRow } from '../../src/features/advisor-keys/service.ts';
import { Toolbox } from '../../src/features/advisor-tools/toolbox.ts';
import { buildMessages, defaultTitle, systemPrompt } from '../../src/features/conversations/context.ts';
import { deltaData, doneData, startData } from '../../src/features/conversations/frames.ts';
import { groundReply } from '../../src/features/conversations/grounding.ts';
import { MAX_OUTPUT_TOKENS } from '../../src/features/conversations/live-turn.ts';
import { LEASE_TTL_MS } from '../../src/features/conversations/stream-runtime.ts';
import { storable } from '../../src/features/conversations/parts.ts';
import * as statements from '../../src/features/conversations/turn-statements.ts';
import { receiptOf } from '../../src/features/usage/receipt.ts';
import type { FinishReason, RoundUsage } from '../../src/providers/llm/index.ts';

/** The floor's own window (the service's limit, under another name): its turns never use up a user's. */
const FLOOR_RULE: RateLimitRule = { name: 'bench-floor-advisor-messages', limit: 30, windowMs: 60_000 };

const config = loadConfig(process.env);
const deps = await createDeps(config, { skipMigrations: true });
const catalogue = statements.catalogueRows(config.catalogue.models);
/** The user's active provider key as the start statement compares it, read once and remembered (as the service does). */
async function readKey(userId: string): Promise<statements.TurnStart['key']> {
  const row = (await readTurnKeys(deps, userId, null)).find((r) => r.kind === 'provider');
  if (row === undefined) return undefined;
  const sealed = { key_id: row.key_id, nonce: new Uint8Array(row.nonce), ciphertext: new Uint8Array(row.ciphertext), tag: new Uint8Array(row.tag) };
  const known = { sealed, opens: !(openTurnKeys(deps, null, [row]).key instanceof Error) };
  deps.streams.knownKeys.set(userId, known);
  return known;
}

/** The provider key row of a start statement's answer (the bench's turns use no market-data key). */
function providerKeyRow(userId: string, row: statements.StartRow): TurnKeyRow[] {
  const { provider, p_key_id: keyId, p_nonce: nonce, p_ciphertext: ciphertext, p_tag: tag } = row;
  if (provider === null || keyId === null || nonce === null || ciphertext === null || tag === null) return [];
  return [{ kind: 'provider', user_id: userId, provider, default_model: row.p_default_model, key_id: keyId, nonce, ciphertext, tag }];
}

async function turn(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const user = await deps.auth.verify(bearerToken(req.headers.authorization) ?? '');
  const admitted = deps.admission.admit(FLOOR_RULE, user.id, LEASE_TTL_MS);
  let raw = '';
  for await (const chunk of req) raw += String(chunk);
  const body = JSON.parse(raw) as { text: string; clientMessageId: string };
  const { decision, lease } = await admitted;
  if (!decision.allowed || lease === null) throw new Error('floor: a turn the bench sends was refused');
  const now = deps.clock.now();
  const conversationId = deps.ids.uuid();
  const userMessageId = deps.ids.uuid();
  const replyId = deps.ids.uuid();
  const start: statements.TurnStart = {
    now,
    userId: user.id,
    target: undefined,
    conversationId,
    title: defaultTitle(body.text),
    personaId: undefined,
    userMessage: { id: userMessageId, content: body.text, clientMessageId: body.clientMessageId },
    replyId,
    attachments: [],
    admission: () => Promise.resolve({ leaseHeld: true, at: now }),
    key: deps.streams.knownKeys.get(user.id) ?? (await readKey(user.id)),
    catalogue,
    historyBudget: deps.config.contextBudgetChars,
  };
  const { row, charge } = await deps.billing.reserveWithin({ turnId: replyId, userId: user.id, images: 0, terms: statements.TERMS }, (db, reservation) =>
    statements.startTurn(db, start, { keys: turnKeysPart(user.id), reservation }),
  );
  const keys = openTurnKeys(deps, null, providerKeyRow(user.id, row));
  if (row.refusal !== null || charge === undefined || keys.key instanceof Error)
    throw new Error(`floor: a turn the bench sends was refused (${String(row.refusal)})`);
  const key = keys.key;
  const toolbox = new Toolbox(deps, user.id, keys.marketKey, true);
  const abort = new AbortController();
  const chat = {
    model: key.model,
    system: systemPrompt(deps.config.catalogue, null, toolbox.offered, now),
    messages: buildMessages([], body.text, []),
    maxTokens: MAX_OUTPUT_TOKENS,
    signal: abort.signal,
    tools: toolbox.offered,
    toolChoice: 'auto' as const,
  };
  const events = deps.llm.stream(key.provider, key.apiKey, chat)[Symbol.asyncIterator]();
  // The provider call goes out before the start frame is logged, as in the service.
  const first = events.next();
  const ids = {
    conversationId,
    userMessageId,
    assistantMessageId: replyId,
    provider: key.provider,
    model: key.model,
    billing: { source: charge.source, credits: charge.credits },
  };
  let text = '';
  const frames = deps.frames.open(replyId, () => '{}', { stop: () => abort.abort(), attached: () => undefined });
  frames.append('start', startData(ids));
  const sse = new SseWriter(res);
  sse.open({});
  const followed = frames.follow(0, sse, abort.signal);
  let finish: FinishReason | undefined;
  const usage: RoundUsage[] = [];
  for (let read = await first; !read.done; read = await events.next()) {
    for (const ev of read.value) {
      if (ev.type === 'delta') {
        text += ev.text;
        frames.append('delta', deltaData(ev.text));
      } else if (ev.type === 'usage') usage.push(ev);
      else if (ev.type === 'finish') finish = ev.reason;
    }
  }
  if (finish === undefined) throw new Error('floor: the reply did not finish');
  const receipt = receiptOf(usage, findModel(deps.config.catalogue, key.provider, key.model)?.pricing);
  const content = storable(text);
  const grounding = groundReply(content, [], body.text);
  const end: statements.TurnEnd = {
    replyId,
    userId: user.id,
    provider: key.provider,
    model: key.model,
    now: deps.clock.now(),
    content,
    parts: null,
    status: 'complete',
    finishReason: finish,
    receipt,
    error: undefined,
    lastFrameId: frames.nextId,
    grounding,
  };
  await deps.billing.settle(charge, true, statements.closingStatement(end));
  await deps.leases.release(user.id, lease);
  frames.end('done', doneData(finish, receipt, 0, grounding));
  await followed;
  sse.end();
}

const server = http.createServer((req, res) => {
  turn(req, res).catch((err: unknown) => {
    process.stderr.write(`${String(err)}\n`);
    if (!res.headersSent) res.writeHead(500).end(String(err));
    else res.destroy();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no address');
  process.stdout.write(`turn floor listening on http://127.0.0.1:${address.port}\n`);
});
process.once('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => void deps.close().then(() => process.exit(0)));
});
