// After the faults heal, the checker proves each invariant of issue 41 (DESIGN §3, §7, §8, §12) from
// what every client saw (the Recorder), what the service answers through its API, and the database.
import type pg from 'pg';
import type { Fleet } from './fleet.ts';
import type { Chain, Recorder, SeenFrame } from './recorder.ts';
import type { Load, LoadResult } from './users.ts';

export interface Violation {
  readonly invariant: string;
  readonly detail: string;
}

export interface Verdict {
  /** Invariant → how many cases it was checked on. */
  readonly checked: Map<string, number>;
  readonly violations: Violation[];
  readonly notes: string[];
}

export const INVARIANTS = {
  walletLedger: 'DESIGN §8: wallet balance = ledger sum, every user',
  purchaseOnce: 'DESIGN §8: each purchase credited once',
  turnCharge: 'DESIGN §7: each turn charged at most once, charged iff it produced text, settled',
  cutReturned: "DESIGN §7: a service-cut turn's charge is returned when it is sent again",
  doneText: 'DESIGN §12: a client that got done assembled exactly the stored text',
  errorText: 'DESIGN §12: a client that got error assembled exactly the stored text',
  idsRise: "DESIGN §12: ids only rise along each client's chain",
  oneFramePerId: 'DESIGN §12: one id never names two frames (all clients of a turn)',
  terminalReached: 'DESIGN §7/§12: every client of a started turn reaches a terminal frame',
  oneLiveTurn: 'DESIGN §4/§12: no user had two turns live at once',
  fence: 'DESIGN §7/§12: a second start while a turn is live → 409 STREAM_IN_PROGRESS',
  tradesOnce: 'DESIGN §14: each acknowledged trade stored once',
  ready: 'DESIGN §10: every instance ready again, none died on its own',
  no500: 'DESIGN §3: no 500 anywhere',
  settled: 'DESIGN §7/§12: no reply left streaming, no reservation left reserved',
} as const;
type Key = keyof typeof INVARIANTS;

export interface CheckInput {
  readonly rec: Recorder;
  readonly load: Load;
  readonly fleet: Fleet;
  readonly sql: pg.Pool;
  /** When each fault was in force (for the violations' details). */
  readonly faults: readonly { kind: string; start: number; end: number }[];
  /** GET on a live instance with the user's token: status and JSON. */
  get(user: string, path: string): Promise<{ status: number; json: unknown }>;
}

/** Cases checked per invariant, and the violations found. */
export class Tally {
  readonly checked = new Map<string, number>();
  readonly violations: Violation[] = [];

  bound(): { count: (k: Key, n?: number) => void; fail: (k: Key, detail: string) => void } {
    return {
      count: (k, n = 1) => void this.checked.set(INVARIANTS[k], (this.checked.get(INVARIANTS[k]) ?? 0) + n),
      fail: (k, detail) => void this.violations.push({ invariant: INVARIANTS[k], detail }),
    };
  }
}

const frameKey = (f: SeenFrame): string => `${f.event} ${JSON.stringify(f.data)}`;
const short = (s: string, n = 160): string => (s.length > n ? `${s.slice(0, n)}…(${s.length} chars)` : s);

/** Where two texts first differ, with some of each from there. */
function parting(a: string, b: string): string {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return `char ${i}: …${JSON.stringify(a.slice(i, i + 60))} against …${JSON.stringify(b.slice(i, i + 60))}`;
}

/** The text a client assembled: deltas appended, a snapshot replacing what came before. */
export function assembled(chain: Chain): string {
  let text = '';
  for (const f of chain.frames) {
    if (f.event === 'snapshot') text = String(f.data['text'] ?? '');
    else if (f.event === 'delta') text += String(f.data['text'] ?? '');
  }
  return text;
}

export async function check(input: CheckInput): Promise<Verdict> {
  const { rec, load, fleet, sql } = input;
  const result: LoadResult = load.result;
  const tally = new Tally();
  const { count, fail } = tally.bound();
  const notes: string[] = [];
  const q = async <T extends pg.QueryResultRow>(text: string, params: unknown[] = []): Promise<T[]> => (await sql.query<T>(text, params)).rows;
  const started = rec.chains.filter((c) => c.turn !== undefined);

  // Wallet = ledger.
  const wallets = await q<{ user_id: string; balance: string; sum: string }>(
    `select w.user_id, w.balance::text, coalesce((select sum(amount) from ledger_entries l where l.user_id = w.user_id), 0)::text as sum from wallets w`,
  );
  for (const w of wallets) {
    count('walletLedger');
    if (w.balance !== w.sum) fail('walletLedger', `user ${w.user_id}: balance ${w.balance}, ledger sum ${w.sum}`);
  }

  // Each purchase credited once (and an acknowledged one credited).
  const purchaseRows = await q<{ reference: string; n: number; amount: string }>(
    `select reference, count(*)::int as n, sum(amount)::text as amount from ledger_entries where kind = 'purchase' group by reference`,
  );
  const credited = new Map(purchaseRows.map((r) => [r.reference, r]));
  for (const p of result.purchases) {
    count('purchaseOnce');
    const row = credited.get(`checkout:${p.sessionId}`);
    if (p.acknowledged && (row?.n !== 1 || row.amount !== String(p.credits))) {
      fail(
        'purchaseOnce',
        `session ${p.sessionId} of ${p.user} (${p.deliveries} deliveries acknowledged): ledger ${row ? `${row.n} entries, ${row.amount} credits` : 'nothing'}, expected 1 entry of ${p.credits}`,
      );
    }
    if (!p.acknowledged && row && row.n > 1) fail('purchaseOnce', `session ${p.sessionId}: ${row.n} purchase entries`);
  }

  // Turn charges by §7.
  const charges = await q<{
    turn_id: string;
    user_id: string;
    source: string;
    credits: string;
    status: string;
    content: string | null;
    mstatus: string | null;
    debit: string | null;
    debits: number;
    refund: string | null;
    refunds: number;
  }>(
    `select t.turn_id, t.user_id, t.source, t.credits::text, t.status, m.content, m.status as mstatus,
            (select sum(amount)::text from ledger_entries l where l.reference = 'turn:' || t.turn_id) as debit,
            (select count(*)::int from ledger_entries l where l.reference = 'turn:' || t.turn_id) as debits,
            (select sum(amount)::text from ledger_entries l where l.reference = 'turn-return:' || t.turn_id) as refund,
            (select count(*)::int from ledger_entries l where l.reference = 'turn-return:' || t.turn_id) as refunds
       from turn_charges t left join messages m on m.id::text = t.turn_id`,
  );
  const sawDelta = new Set(
    rec.chains.filter((c) => c.frames.some((f) => f.event === 'delta' || (f.event === 'snapshot' && f.data['text'] !== ''))).map((c) => c.turn),
  );
  const chargeOf = new Map(charges.map((c) => [c.turn_id, c]));
  for (const c of charges) {
    count('turnCharge');
    const where = `turn ${c.turn_id} of ${c.user_id} (${c.source}, ${c.credits} credits, reply ${c.mstatus ?? 'removed'})`;
    if (c.status === 'reserved') {
      fail('settled', `${where}: still reserved after the faults healed`);
      continue;
    }
    const produced = c.content !== null ? c.content !== '' : sawDelta.has(c.turn_id);
    if (c.status === 'charged' && !produced) fail('turnCharge', `${where}: charged, yet it produced no text`);
    if (c.status === 'returned' && produced && c.content !== null) fail('turnCharge', `${where}: returned, yet it produced ${c.content.length} characters`);
    if (c.debits > 1 || c.refunds > 1) fail('turnCharge', `${where}: ${c.debits} debits and ${c.refunds} returns in the ledger`);
    if (c.source === 'credits') {
      const net = Number(c.debit ?? 0) + Number(c.refund ?? 0);
      const expected = c.status === 'charged' ? -Number(c.credits) : 0;
      if (net !== expected) fail('turnCharge', `${where} ${c.status}: ledger net ${net}, expected ${expected}`);
    }
  }

  // A cut turn sent again: its charge returned.
  const resentTurns = new Set<string>();
  for (const r of result.resends) {
    const c = chargeOf.get(r.cutTurn);
    if (!c || c.source === 'free' || resentTurns.has(r.cutTurn)) continue;
    resentTurns.add(r.cutTurn);
    count('cutReturned');
    if (c.status !== 'returned') {
      fail(
        'cutReturned',
        `user ${r.user}: turn ${r.cutTurn} cut by the service (${terminalOf(rec, r.cutTurn)}) and sent again (${r.how}, ${r.chain.key} → ${r.chain.turn}): its ${c.source} charge is ${c.status} (${c.credits} credits)`,
      );
    }
  }

  // Every chain. A same-id resend answered with a replay of the stored reply is a stream of its own
  // (DESIGN §7 idempotency), not the turn's frame log: its ids are not compared with the log's.
  const replays = new Set(result.resends.filter((r) => r.how === 'same-id' && r.chain.turn === r.cutTurn).map((r) => r.chain.key));
  checkChains(tally, started, replays, (c) => describe(c, fleet));

  // Text: what the API says each reply holds, read once per conversation.
  const stored = new Map<string, string>();
  const conversations = new Map<string, string>();
  for (const c of started) if (c.conversationId && c.terminal) conversations.set(c.conversationId, c.user);
  for (const [id, user] of conversations) {
    let cursor: string | undefined;
    for (let page = 0; page < 50; page++) {
      const res = await input.get(user, `/api/advisor/conversations/${id}?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      if (res.status === 404) break;
      if (res.status !== 200) {
        notes.push(`GET conversation ${id}: ${res.status}`);
        break;
      }
      const body = res.json as { messages: { id: string; role: string; text: string }[]; nextCursor: string | null };
      for (const m of body.messages) if (m.role === 'assistant') stored.set(m.id, m.text);
      if (!body.nextCursor) break;
      cursor = body.nextCursor;
    }
  }
  let replaced = 0;
  for (const chain of started) {
    if (!chain.terminal || chain.turn === undefined) continue;
    const text = stored.get(chain.turn);
    if (text === undefined) {
      replaced++;
      continue;
    }
    const k: Key = chain.terminal.event === 'done' ? 'doneText' : 'errorText';
    count(k);
    const got = assembled(chain);
    if (got !== text) {
      fail(
        k,
        `${chain.key} of ${chain.user}, turn ${chain.turn}: assembled ${got.length} chars, stored ${text.length}; assembled …${JSON.stringify(got.slice(-40))} stored …${JSON.stringify(text.slice(-40))}; chain ${describe(chain, fleet)}`,
      );
    }
  }
  if (replaced > 0) notes.push(`${replaced} client chain(s) of replies since replaced (their text is gone) not compared`);

  // One live turn per user: the replies' lifetimes never overlap. A reply ends when it was stored, when
  // any client saw its terminal frame, or when the instance running it was killed, whichever is first.
  const replies = await q<{ id: string; user_id: string; created: string; completed: string | null }>(
    `select id::text, user_id, (extract(epoch from created_at) * 1000)::float8::text as created, (extract(epoch from completed_at) * 1000)::float8::text as completed
       from messages where role = 'assistant' order by user_id, created_at`,
  );
  const killedAt = new Map(fleet.ends.filter((e) => e.signal === 'SIGKILL').map((e) => [e.pid, e.at]));
  const endOf = new Map<string, number>();
  for (const c of rec.chains) {
    if (c.turn === undefined) continue;
    let end = endOf.get(c.turn) ?? Infinity;
    if (c.terminal) end = Math.min(end, c.terminal.at);
    const k = c.startedOnPid === undefined ? undefined : killedAt.get(c.startedOnPid);
    if (k !== undefined && c.frames.length > 0 && c.frames[0] && c.frames[0].at < k) end = Math.min(end, k);
    endOf.set(c.turn, end);
  }
  const users = new Map<string, { id: string; start: number; end: number }[]>();
  for (const r of replies) {
    const end = Math.min(r.completed === null ? Infinity : Number(r.completed), endOf.get(r.id) ?? Infinity);
    const list = users.get(r.user_id) ?? [];
    list.push({ id: r.id, start: Number(r.created), end });
    users.set(r.user_id, list);
  }
  for (const [user, list] of users) {
    count('oneLiveTurn');
    let open: { id: string; start: number; end: number } | undefined;
    for (const t of list) {
      if (open && t.start < open.end) {
        fail('oneLiveTurn', `user ${user}: turn ${t.id} started ${Math.round(open.end - t.start)} ms before turn ${open.id} ended`);
      }
      if (!open || t.end > open.end) open = t;
    }
  }

  // Fence probes.
  const probeTally: Record<string, number> = {};
  for (const p of result.probes) {
    const key = p.status === 200 ? '200 admitted' : `${p.status} ${p.code ?? ''}`.trim();
    probeTally[key] = (probeTally[key] ?? 0) + 1;
    if (p.status === 409 && p.code === 'STREAM_IN_PROGRESS') {
      count('fence');
      continue;
    }
    // Refused because a dependency was down (503, 402 BILLING_NOT_AVAILABLE), a limit, or the instance
    // went away: the fence was not asked. A 500 is the no-500 invariant's (no turn was admitted).
    if (p.status === 503 || p.status === 0 || p.status === 429 || p.status === 500 || p.code === 'BILLING_NOT_AVAILABLE') continue;
    if (p.status === 200) {
      // Admitted: a violation only if the live turn had not ended (the one-live-turn check measures it).
      const probeStart = replies.find((r) => r.id === p.admittedTurn);
      const liveEnd = endOf.get(p.liveTurn) ?? Infinity;
      const liveRow = replies.find((r) => r.id === p.liveTurn);
      const end = Math.min(liveEnd, liveRow?.completed ? Number(liveRow.completed) : Infinity);
      if (probeStart && Number(probeStart.created) >= end) continue;
    }
    count('fence');
    fail(
      'fence',
      `user ${p.user}: a second start while turn ${p.liveTurn} was live got ${p.status} ${p.code ?? ''}${p.admittedTurn ? ` (started turn ${p.admittedTurn})` : ''}`,
    );
  }
  notes.push(`fence probes: ${JSON.stringify(probeTally)}`);

  // Trades stored once.
  for (const u of result.users) {
    if (!u.accountId) continue;
    const rows = await q<{ external_id: string; n: number }>(
      `select external_id, count(*)::int as n from trades where account_id = $1 and external_id is not null group by external_id`,
      [u.accountId],
    );
    const n = new Map(rows.map((r) => [r.external_id, r.n]));
    for (const [ext, k] of n) if (k > 1) fail('tradesOnce', `user ${u.id}: externalId ${ext} stored ${k} times`);
    for (const ext of u.trades) {
      count('tradesOnce');
      if (n.get(ext) !== 1) fail('tradesOnce', `user ${u.id}: acknowledged trade ${ext} stored ${n.get(ext) ?? 0} times`);
    }
  }

  // Every instance ready; none died on its own.
  for (const s of fleet.slots) {
    count('ready');
    const res = await fetch(`${s.instance.url}/readyz`).catch(() => undefined);
    if (res?.status !== 200) fail('ready', `slot ${s.index} (${s.instance.url}): /readyz ${res?.status ?? 'unreachable'}`);
  }
  for (const x of fleet.unexpectedExits()) fail('ready', `pid ${x.pid} exited on its own (${x.code ?? x.signal}):\n${x.lastWords}`);

  // No 500: grouped by route and the fault in force (within 5 s of it).
  const groups = new Map<string, { n: number; first: number; last: number }>();
  for (const h of rec.http) {
    count('no500');
    if (h.status !== 500) continue;
    const during = input.faults.filter((f) => h.at >= f.start - 1000 && h.at <= f.end + 5000).map((f) => f.kind);
    const key = `${h.what}: 500 ${h.code ?? ''} (${during.length > 0 ? `during/after ${during.join(', ')}` : 'no fault in force'})`;
    const g = groups.get(key) ?? { n: 0, first: h.at, last: h.at };
    g.n++;
    g.last = h.at;
    groups.set(key, g);
  }
  for (const [key, g] of groups) fail('no500', `${key} ×${g.n}, ${new Date(g.first).toISOString()} – ${new Date(g.last).toISOString()}`);

  // Nothing left streaming.
  const streaming = await q<{ id: string; user_id: string }>(`select id::text, user_id from messages where status = 'streaming'`);
  count('settled');
  for (const s of streaming) fail('settled', `reply ${s.id} of ${s.user_id} still streaming`);

  return { checked: tally.checked, violations: tally.violations, notes };
}

/**
 * The stream invariants of every client chain of a started turn (DESIGN §12): ids only rise, a terminal
 * frame is reached, one id never names two frames across the clients of a turn (a snapshot at id n
 * holds exactly the text of frames 1..n). `replays`: chains answered with a replay of a stored reply.
 */
export function checkChains(t: Tally, started: readonly Chain[], replays: ReadonlySet<string>, describe: (c: Chain) => string): void {
  const { count, fail } = t.bound();
  const byTurn = new Map<string, Map<number, { key: string; chain: string }>>();
  const snapshots = new Map<string, { id: number; text: string; chain: string }[]>();
  for (const chain of started) {
    count('idsRise');
    let last = -Infinity;
    for (const f of chain.frames) {
      if (f.id === undefined) continue;
      if (f.id <= last) {
        fail('idsRise', `${chain.key} of ${chain.user}, turn ${chain.turn}: id ${f.id} (${f.event}) after ${last}; chain ${describe(chain)}`);
        break;
      }
      last = f.id;
    }
    count('terminalReached');
    if (chain.terminal === undefined)
      fail('terminalReached', `${chain.key} of ${chain.user}, turn ${chain.turn}: ${chain.abandoned ?? 'no terminal frame'}; chain ${describe(chain)}`);
    if (replays.has(chain.key)) continue;
    const ids = byTurn.get(chain.turn ?? '') ?? new Map<number, { key: string; chain: string }>();
    byTurn.set(chain.turn ?? '', ids);
    for (const f of chain.frames) {
      if (f.id === undefined) continue;
      // A snapshot stands in for the frames up to its id (DESIGN §12): compared with them below.
      if (f.event === 'snapshot') {
        const list = snapshots.get(chain.turn ?? '') ?? [];
        list.push({ id: f.id, text: String(f.data['text'] ?? ''), chain: chain.key });
        snapshots.set(chain.turn ?? '', list);
        continue;
      }
      const seen = ids.get(f.id);
      if (seen === undefined) ids.set(f.id, { key: frameKey(f), chain: chain.key });
      else if (seen.key !== frameKey(f)) {
        fail(
          'oneFramePerId',
          `turn ${chain.turn} of ${chain.user}: id ${f.id} is "${short(seen.key)}" to ${seen.chain} and "${short(frameKey(f))}" to ${chain.key}; they part at ${parting(seen.key, frameKey(f))}`,
        );
      }
    }
  }
  for (const [, ids] of byTurn) count('oneFramePerId', ids.size > 0 ? 1 : 0);
  // A snapshot at id n holds exactly the text of frames 1..n, where every one of those was seen.
  for (const [turn, list] of snapshots) {
    const ids = byTurn.get(turn) ?? new Map<number, { key: string; chain: string }>();
    for (const snap of list) {
      let text = '';
      let complete = true;
      for (let id = 1; id <= snap.id && complete; id++) {
        const frame = ids.get(id);
        if (frame === undefined) complete = false;
        else if (frame.key.startsWith('delta ')) text += String((JSON.parse(frame.key.slice(6)) as { text?: string }).text ?? '');
      }
      if (!complete) continue;
      if (text !== snap.text) {
        const at = ids.get(snap.id);
        fail(
          'oneFramePerId',
          `turn ${turn}: the snapshot at id ${snap.id} to ${snap.chain} holds ${snap.text.length} chars (…${JSON.stringify(snap.text.slice(-30))}), frames 1..${snap.id} hold ${text.length} (…${JSON.stringify(text.slice(-30))}; id ${snap.id} is "${short(at?.key ?? '', 80)}" to ${at?.chain})`,
        );
      }
    }
  }
}

function terminalOf(rec: Recorder, turn: string): string {
  const t = rec.chains.find((c) => c.turn === turn && c.role !== 'follower' && c.terminal)?.terminal;
  return t ? `${t.id}:${t.event} ${short(JSON.stringify(t.data), 80)}` : 'no terminal frame';
}

/** A chain in brief: each connection (instance port, Last-Event-ID, status) and its frames as id:event. */
function describe(chain: Chain, fleet: Fleet): string {
  const parts: string[] = [];
  chain.connections.forEach((c, i) => {
    const frames = chain.frames.filter((f) => f.conn === i + 1 || (i === 0 && f.conn === 0));
    const list = frames.map(
      (f) =>
        `${f.id ?? '-'}:${f.event}${f.event === 'error' ? `(${String(f.data['code'])})` : f.event === 'done' ? `(${String(f.data['finishReason'])})` : ''}`,
    );
    const shown = list.length > 8 ? [...list.slice(0, 3), '…', ...list.slice(-4)] : list;
    const end = fleet.endOf(c.instance);
    const fate = end === 'SIGKILL' ? ' (killed -9)' : end === 'SIGTERM' ? ' (SIGTERMed)' : '';
    parts.push(
      `[${new URL(c.instance).port}${fate}${c.lastEventId !== undefined ? ` after ${c.lastEventId}` : ''} → ${c.status}${c.broken ? ' broken' : ''}: ${shown.join(' ')}]`,
    );
  });
  return parts.join(' ');
}
