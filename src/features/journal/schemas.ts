import { Type, type Static } from 'typebox';
import { CalendarDay, Instant } from '../../http/dates.ts';
import { IsoDateTime, named, ref, Uuid, type NamedSchema } from '../../http/schemas.ts';

export const SYMBOL_PATTERN = '^[A-Za-z0-9.:^/-]{1,24}$';
const TRADE_DECIMAL = '^[0-9]{1,12}(\\.[0-9]{1,8})?$';
export const MAX_NOTE = 2000;
export const MAX_EXTERNAL_ID = 128;
export const MAX_TAGS = 10;
export const MAX_TAG = 32;

const Symbol = Type.String({ pattern: SYMBOL_PATTERN, description: 'Ticker as the broker writes it; stored upper case' });
const Side = Type.Union([Type.Literal('buy'), Type.Literal('sell')]);
const Decimal = (description: string) =>
  Type.String({
    pattern: TRADE_DECIMAL,
    description: `${description}; a decimal string of at most 12 integer and 8 fractional digits, returned canonical ("12.50" → "12.5")`,
  });
const Note = Type.String({ maxLength: MAX_NOTE });
const Tags = Type.Array(Type.String({ minLength: 1, maxLength: MAX_TAG }), {
  maxItems: MAX_TAGS,
  uniqueItems: true,
  description: `At most ${MAX_TAGS}, each 1 to ${MAX_TAG} characters, no repeats`,
});
const Day = Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$' });
/** Money as the journal writes it: a canonical decimal string, half to even at 8 places. */
const Money = Type.String({ description: 'Decimal string, rounded half to even to at most 8 fractional digits' });
const Ratio = Type.Union([Type.String({ description: 'Decimal string, rounded half to even to at most 4 fractional digits' }), Type.Null()], {
  description: 'null when it has no denominator',
});
const Count = Type.Integer({ minimum: 0 });

export const TradeParams = Type.Object({ id: Uuid, tradeId: Uuid });

export const CreateTradeBody = Type.Object(
  {
    symbol: Symbol,
    side: Side,
    quantity: Decimal('> 0'),
    price: Decimal('≥ 0'),
    fee: Type.Optional(Decimal('≥ 0; default "0"')),
    executedAt: Instant('When the fill executed; at most 5 minutes in the future'),
    externalId: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: MAX_EXTERNAL_ID,
        description:
          'The broker’s execution id, unique per account: the same create again → 200 with the stored trade; with other fields → 409 TRADE_EXTERNAL_ID_REUSED',
      }),
    ),
    note: Type.Optional(Note),
    tags: Type.Optional(Tags),
  },
  { additionalProperties: false },
);
export type CreateTradeInput = Static<typeof CreateTradeBody>;

/** DESIGN §14: only the note and the tags change; any other field → 400 VALIDATION_ERROR. */
export const UpdateTradeBody = Type.Object(
  { note: Type.Optional(Type.Union([Note, Type.Null()], { description: 'null clears it' })), tags: Type.Optional(Tags) },
  { additionalProperties: false },
);
export type UpdateTradeInput = Static<typeof UpdateTradeBody>;

const TradeSchema = named(
  'Trade',
  Type.Object({
    id: Uuid,
    accountId: Uuid,
    symbol: Type.String(),
    side: Side,
    quantity: Type.String(),
    price: Type.String(),
    fee: Type.String(),
    executedAt: IsoDateTime,
    tradingDay: Day,
    externalId: Type.Union([Type.String(), Type.Null()]),
    note: Type.Union([Type.String(), Type.Null()]),
    tags: Type.Array(Type.String()),
    createdAt: IsoDateTime,
  }),
);
export const Trade = ref(TradeSchema);
export type TradeDto = Static<typeof TradeSchema>;

export const TradeListQuery = Type.Object(
  {
    from: Type.Optional(CalendarDay('First trading day included')),
    to: Type.Optional(CalendarDay('Last trading day included')),
    symbol: Type.Optional(Symbol),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 300, description: 'The previous page’s nextCursor' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, description: 'Default 50' })),
  },
  { additionalProperties: false },
);
export type TradeListQueryInput = Static<typeof TradeListQuery>;

const TradePageSchema = named(
  'TradePage',
  Type.Object({ items: Type.Array(Trade, { description: 'Newest executedAt first' }), nextCursor: Type.Union([Type.String(), Type.Null()]) }),
);
export const TradePage = ref(TradePageSchema);

const ImportReportSchema = named(
  'TradeImportReport',
  Type.Object({
    imported: Count,
    duplicates: Type.Integer({
      minimum: 0,
      description: 'Rows already stored (same externalId and fields, or the same row without externalId), or repeated in the file',
    }),
    rejectedCount: Count,
    rejected: Type.Array(
      Type.Object({
        row: Type.Integer({ minimum: 1, description: '1-based data row (the header is row 0)' }),
        code: Type.String({ description: 'The code a create of this row would get: VALIDATION_ERROR or TRADE_EXTERNAL_ID_REUSED' }),
        message: Type.String(),
      }),
      { maxItems: 100, description: 'The first 100 rejected rows' },
    ),
  }),
);
export const ImportReport = ref(ImportReportSchema);
export type ImportReportDto = Static<typeof ImportReportSchema>;

export const CsvBody = Type.String({
  description:
    'text/csv (RFC 4180), at most 5 MiB and 50,000 data rows; a header row names the columns symbol, side, quantity, price, fee, executedAt, ' +
    'externalId, note (any order and case; fee, externalId and note optional; side also B/S/BOT/SLD)',
});

export const JournalQuery = Type.Object(
  {
    from: Type.Optional(CalendarDay('First trading day included; default 29 days before `to`')),
    to: Type.Optional(CalendarDay('Last trading day included; default the account’s trading day now')),
  },
  { additionalProperties: false },
);
export type JournalQueryInput = Static<typeof JournalQuery>;

const JournalDaySchema = named(
  'JournalDay',
  Type.Object({
    tradingDay: Day,
    realizedPnl: Money,
    fees: Money,
    netPnl: Money,
    fills: Count,
    roundTrips: Count,
    wins: Count,
    losses: Count,
  }),
);

const JournalSchema = named(
  'Journal',
  Type.Object({
    accountId: Uuid,
    currency: Type.String(),
    from: Day,
    to: Day,
    totals: Type.Object({
      realizedPnl: Money,
      fees: Money,
      netPnl: Money,
      roundTrips: Count,
      wins: Count,
      losses: Count,
      winRate: Ratio,
      profitFactor: Ratio,
      expectancy: Type.Union([Money, Type.Null()], { description: 'Net P&L per round trip; null with no round trip' }),
      averageWin: Type.Union([Money, Type.Null()]),
      averageLoss: Type.Union([Money, Type.Null()], { description: 'Negative' }),
      largestWin: Type.Union([Money, Type.Null()]),
      largestLoss: Type.Union([Money, Type.Null()], { description: 'Negative' }),
      maxDrawdown: Type.String({ description: 'Largest peak-to-trough fall of cumulative netPnl over the range’s days, from 0 at its start; ≥ 0' }),
    }),
    days: Type.Array(ref(JournalDaySchema), { description: 'Days with fills, oldest first' }),
    openPositions: Type.Array(
      Type.Object({
        symbol: Type.String(),
        quantity: Type.String({ description: 'Negative for a short' }),
        averagePrice: Money,
        openedAt: IsoDateTime,
      }),
      { description: 'After the last fill whose trading day is on or before `to`' },
    ),
    balance: Type.String({ description: 'startingBalance + all-time netPnl' }),
  }),
);
export const Journal = ref(JournalSchema);
export type JournalDto = Static<typeof JournalSchema>;

export const components: NamedSchema[] = [TradeSchema, TradePageSchema, ImportReportSchema, JournalDaySchema, JournalSchema];
