// Runs the advisor's tool calls for one turn (DESIGN §11): arguments checked against the tool's
// schema, market reads on the user's own market-data key under a deadline, the trader's accounts
// through the accounts feature, every failure turned into a result the model is told about.
import { Ajv, type ValidateFunction } from 'ajv';
import type { Deps } from '../../deps.ts';
import { jsonObject, type ToolCallPart, type ToolSpec } from '../../providers/llm/index.ts';
import { MarketDataError, type MarketReads } from '../../providers/market-data/index.ts';
import { listAccounts, listBrokerages } from '../accounts/service.ts';
import { markMarketDataKeyRefused, type UsableMarketDataKey } from '../advisor-keys/market-data-service.ts';
import { capResult } from './cap.ts';
import { getJournal, journalReportTool, listTradesTool, positionSizeTool, roundTripsTool, ToolRefusal } from './journal-tools.ts';
import {
  MARKET_TOOLS,
  TOOL_DEFINITIONS,
  TOOL_NAMES,
  toolSpec,
  type JournalInput,
  type PositionSizeInput,
  type PriceHistoryInput,
  type QuoteInput,
  type ReportInput,
  type RoundTripsInput,
  type TradesInput,
  type SearchInput,
  type ToolName,
} from './definitions.ts';

type ToolErrorCode =
  | MarketDataError['code']
  | 'TOOL_INVALID_ARGUMENTS'
  /** The model named a tool it was not offered. */
  | 'UNKNOWN_TOOL'
  /** ADVISOR_MAX_TOOL_CALLS were run; this call was not. */
  | 'TOOL_CALL_LIMIT_REACHED'
  /** The service could not run the tool (its own store failed). */
  | 'TOOL_FAILED'
  /** A journal tool's `account` names none of the user's accounts (the message lists them). */
  | 'ACCOUNT_NOT_FOUND'
  /** A journal tool's `account` (or its absence) fits several accounts (the message lists the candidates). */
  | 'ACCOUNT_AMBIGUOUS';

/**
 * A tool call's result, as the model is told it, the client is shown it and a reply stores it.
 * A reply read back from storage or a frame log has any string as its code (`ToolOutcome<string>`).
 */
export type ToolOutcome<Code extends string = ToolErrorCode> =
  | { readonly ok: true; readonly result: Readonly<Record<string, unknown>> }
  | { readonly ok: false; readonly error: { readonly code: Code; readonly message: string } };

/** The user's market-data key as the tools use it; never sent anywhere but the market-data provider. */
export type MarketKey = UsableMarketDataKey;

type ToolDeps = Pick<Deps, 'db' | 'clock' | 'ids' | 'vault' | 'config' | 'logger'> & { readonly marketData: MarketReads };

const ajv = new Ajv({ allErrors: false, strict: false });
const validators = Object.fromEntries(TOOL_NAMES.map((n) => [n, ajv.compile(TOOL_DEFINITIONS[n].parameters)])) as Record<ToolName, ValidateFunction>;

/** Longest span of intraday bars a call may ask for (a provider would page through thousands of bars). */
const MAX_INTRADAY_DAYS = 31;
const MAX_DAILY_DAYS = 366 * 20;

export class Toolbox {
  /** The tools offered this turn, in a stable order. */
  readonly offered: readonly ToolSpec[];
  /** ADVISOR_MAX_TOOL_CALLS: calls a turn may run. */
  readonly maxCalls: number;
  readonly #names: ReadonlySet<string>;
  readonly #deps: ToolDeps;
  readonly #userId: string;
  readonly #marketKey: MarketKey | undefined;
  /** The provider refused the key during this turn (marked unverified once). */
  #marketKeyRejected = false;

  /** `enabled` false (the model's catalogue entry says `"tools": false`) offers nothing. */
  constructor(deps: ToolDeps, userId: string, marketKey: MarketKey | undefined, enabled: boolean) {
    this.#deps = deps;
    this.#userId = userId;
    this.#marketKey = marketKey;
    this.maxCalls = deps.config.advisorMaxToolCalls;
    const names = !enabled ? [] : TOOL_NAMES.filter((n) => marketKey !== undefined || !MARKET_TOOLS.includes(n));
    this.#names = new Set(names);
    this.offered = names.map(toolSpec);
  }

  /**
   * One call. Never rejects for the tool's own failures (they are results); rejects with the
   * signal's reason when `signal` aborts (the turn is ending).
   */
  async run(call: ToolCallPart, signal: AbortSignal): Promise<ToolOutcome> {
    if (!this.#names.has(call.name)) return failure('UNKNOWN_TOOL', `no tool named "${call.name.slice(0, 64)}" is offered in this conversation`);
    const name = call.name as ToolName;
    // Providers send `""` or nothing for a call without parameters.
    const args = call.arguments.trim() === '' ? {} : jsonObject(call.arguments);
    if (args === undefined) return failure('TOOL_INVALID_ARGUMENTS', 'arguments must be a JSON object');
    const validate = validators[name];
    if (!validate(args)) {
      const e = validate.errors?.[0];
      return failure('TOOL_INVALID_ARGUMENTS', `${e?.instancePath || '/'} ${e?.message ?? 'is invalid'}`.trim());
    }
    const rangeProblem = name === 'get_price_history' ? checkRange(args as PriceHistoryInput) : undefined;
    if (rangeProblem !== undefined) return failure('TOOL_INVALID_ARGUMENTS', rangeProblem);
    try {
      return { ok: true, result: capResult(name, await this.#execute(name, args, signal)) };
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      if (err instanceof ToolRefusal) return failure(err.code, err.message);
      if (err instanceof MarketDataError) {
        if (err.code === 'MARKET_DATA_KEY_INVALID' && !this.#marketKeyRejected && this.#marketKey) {
          this.#marketKeyRejected = true;
          await markMarketDataKeyRefused(this.#deps, this.#userId, this.#marketKey, err.status).catch((e: unknown) =>
            this.#deps.logger.error({ err: e }, 'marking a refused market-data key failed'),
          );
        }
        return failure(err.code, err.message);
      }
      this.#deps.logger.error({ err, tool: name }, 'advisor tool failed');
      return failure('TOOL_FAILED', 'the tool could not run; try again later');
    }
  }

  async #execute(name: ToolName, args: object, turn: AbortSignal): Promise<Record<string, unknown>> {
    switch (name) {
      case 'list_my_accounts':
        return this.#accounts();
      case 'get_journal':
        return getJournal(this.#deps, this.#userId, args as JournalInput);
      case 'list_trades':
        return listTradesTool(this.#deps, this.#userId, args as TradesInput);
      case 'position_size':
        return positionSizeTool(this.#deps, this.#userId, args as PositionSizeInput);
      case 'get_round_trips':
        return roundTripsTool(this.#deps, this.#userId, args as RoundTripsInput);
      case 'get_journal_report':
        return journalReportTool(this.#deps, this.#userId, args as ReportInput);
    }
    const key = this.#marketKey;
    // Offered only with a key (the constructor), so a market tool always has one here.
    if (key === undefined) throw new Error(`market tool ${name} ran without a market-data key`);
    const md = this.#deps.marketData;
    const signal = AbortSignal.any([turn, AbortSignal.timeout(this.#deps.config.marketDataTimeoutMs)]);
    switch (name) {
      case 'get_quote':
        return { ...(await md.quote(key.apiKey, (args as QuoteInput).symbol.toUpperCase(), signal)) };
      case 'get_price_history': {
        const a = args as PriceHistoryInput;
        return { ...(await md.priceHistory(key.apiKey, { ...a, symbol: a.symbol.toUpperCase() }, signal)) };
      }
      case 'get_market_status':
        return { ...(await md.marketStatus(key.apiKey, signal)) };
      case 'search_symbols':
        return { matches: await md.searchSymbols(key.apiKey, (args as SearchInput).query, signal) };
    }
  }

  async #accounts(): Promise<Record<string, unknown>> {
    const [accounts, brokerages] = await Promise.all([listAccounts(this.#deps, this.#userId), listBrokerages(this.#deps, this.#userId)]);
    const brokerageName = new Map(brokerages.map((b) => [b.id, b.name]));
    return {
      accounts: accounts.map((a) => ({
        name: a.name,
        currency: a.currency,
        timezone: a.timezone,
        brokerage: a.brokerageId === null ? null : (brokerageName.get(a.brokerageId) ?? null),
        startingBalance: a.startingBalance,
      })),
    };
  }
}

/** The result of a call the turn did not run because ADVISOR_MAX_TOOL_CALLS were run. */
export function overLimit(max: number): ToolOutcome {
  return failure('TOOL_CALL_LIMIT_REACHED', `at most ${max} tool calls per answer; answer with what you have`);
}

/** Whether an outcome is of a call that ran: every one but overLimit's (a turn counts these, DESIGN §11). */
export const ranTool = (outcome: ToolOutcome<string>): boolean => outcome.ok || outcome.error.code !== 'TOOL_CALL_LIMIT_REACHED';

function failure(code: ToolErrorCode, message: string): ToolOutcome {
  return { ok: false, error: { code, message } };
}

function checkRange(a: PriceHistoryInput): string | undefined {
  const from = Date.parse(`${a.from}T00:00:00Z`);
  const to = Date.parse(`${a.to}T00:00:00Z`);
  if (Number.isNaN(from) || Number.isNaN(to) || new Date(from).toISOString().slice(0, 10) !== a.from || new Date(to).toISOString().slice(0, 10) !== a.to) {
    return '/from and /to must be real calendar dates';
  }
  if (from > to) return '/from must not be after /to';
  const days = (to - from) / 86_400_000 + 1;
  const max = a.interval === '1day' ? MAX_DAILY_DAYS : MAX_INTRADAY_DAYS;
  if (days > max) return `a ${a.interval} range may span at most ${max} days`;
  return undefined;
}
