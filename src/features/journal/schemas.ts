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
const AssetClassSchema = Type.Union(
  [Type.Literal('stock'), Type.Literal('future'), Type.Literal('option'), Type.Literal('forex'), Type.Literal('crypto'), Type.Literal('cfd')],
  { description: 'stock (default), future, option, forex, crypto, cfd; a symbol written with a leading / defaults to future' },
);
const EXCLUDE_PATTERN = '^(weekday|tag|symbol|hour|side|holdTime):.{1,40}$';
const Exclude = Type.Optional(
  Type.Union([Type.String({ pattern: EXCLUDE_PATTERN }), Type.Array(Type.String({ pattern: EXCLUDE_PATTERN }), { maxItems: 20 })], {
    description:
      'What-if (repeatable or comma-separated): weekday:fri, tag:revenge, symbol:TSLA, hour:15, side:short, holdTime:<1m — ' +
      'the figures over the round trips that remain',
  }),
);

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
    assetClass: Type.Optional(AssetClassSchema),
    multiplier: Type.Optional(
      Decimal('> 0; what one unit of quantity is worth per point of price. Default: a future’s exchange multiplier by its root (ES 50), an option 100, else 1'),
    ),
    stopPrice: Type.Optional(Type.Union([Decimal('≥ 0; the planned stop: an opening fill’s stop makes its round trip’s initial risk'), Type.Null()])),
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
    assetClass: AssetClassSchema,
    multiplier: Type.String({ description: 'Decimal string: realized P&L is (sell − buy) × quantity × multiplier' }),
    stopPrice: Type.Union([Type.String(), Type.Null()]),
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
    format: Type.String({ description: 'The layout read (GET /api/journal/import-formats): detected from the header, or ?format=' }),
    timezone: Type.Union([Type.String(), Type.Null()], {
      description: 'The zone timestamps without an offset were read in (?timezone=, else the account’s zone in force); null when every one had its own',
    }),
    dryRun: Type.Boolean(),
    imported: Type.Integer({ minimum: 0, description: 'Trades added (with dryRun: that would be added)' }),
    duplicates: Type.Integer({
      minimum: 0,
      description: 'Rows already stored (same externalId and fields, or the same row without externalId), or repeated in the file',
    }),
    skipped: Type.Integer({ minimum: 0, description: 'Rows the broker marks as not an execution (cancelled orders, totals, deposits) and lines of blanks' }),
    rejectedCount: Count,
    rejected: Type.Array(
      Type.Object({
        row: Type.Integer({ minimum: 1, description: '1-based data row (the header is row 0)' }),
        code: Type.String({ description: 'The code a create of this row would get: VALIDATION_ERROR or TRADE_EXTERNAL_ID_REUSED' }),
        message: Type.String(),
      }),
      { maxItems: 100, description: 'The first 100 rejected rows' },
    ),
    preview: Type.Optional(Type.Array(Trade, { maxItems: 20, description: 'dryRun only: the first 20 trades as they would be stored' })),
  }),
);
export const ImportReport = ref(ImportReportSchema);
export type ImportReportDto = Static<typeof ImportReportSchema>;

export const ImportQuery = Type.Object(
  {
    format: Type.Optional(Type.String({ minLength: 1, maxLength: 40, description: 'A layout id of GET /api/journal/import-formats; default: detected' })),
    timezone: Type.Optional(
      Type.String({ minLength: 1, maxLength: 64, description: 'IANA zone for timestamps without an offset; default the account’s in force' }),
    ),
    dryRun: Type.Optional(Type.Boolean({ description: 'true: the report and a preview, nothing written' })),
  },
  { additionalProperties: false },
);
export type ImportQueryInput = Static<typeof ImportQuery>;

const ImportFormatsSchema = named(
  'ImportFormats',
  Type.Object({
    formats: Type.Array(
      Type.Object({
        id: Type.String(),
        name: Type.String(),
        how: Type.String({ description: 'Where the trader gets the file' }),
        columns: Type.Array(Type.String(), { description: 'The columns the layout reads' }),
      }),
    ),
  }),
);
export const ImportFormats = ref(ImportFormatsSchema);

export const ExportQuery = Type.Object(
  {
    from: Type.Optional(CalendarDay('First trading day included')),
    to: Type.Optional(CalendarDay('Last trading day included')),
    symbol: Type.Optional(Symbol),
  },
  { additionalProperties: false },
);
export type ExportQueryInput = Static<typeof ExportQuery>;

export const TradeCount = Type.Object({ count: Count });

const RoundTripSchema = named(
  'RoundTrip',
  Type.Object({
    id: Type.String({ description: 'The id of the fill that closed it' }),
    symbol: Type.String(),
    side: Type.Union([Type.Literal('long'), Type.Literal('short')]),
    assetClass: Type.String(),
    multiplier: Type.String(),
    openedAt: IsoDateTime,
    closedAt: IsoDateTime,
    tradingDay: Day,
    holdSeconds: Type.Integer({ minimum: 0 }),
    maxQuantity: Type.String(),
    entryAverage: Type.String({ description: 'Quantity-weighted price of what opened and added to the position (8 places)' }),
    exitAverage: Type.String({ description: 'Quantity-weighted price of what closed it (8 places)' }),
    realizedPnl: Money,
    fees: Money,
    netPnl: Money,
    initialRisk: Type.Union([Money, Type.Null()], { description: '|entry − stop| × quantity × multiplier of its opening fill; null without a stop' }),
    rMultiple: Ratio,
    fills: Count,
    tags: Type.Array(Type.String(), { description: 'The union of its fills’ tags' }),
  }),
);
export type RoundTripDto = Static<typeof RoundTripSchema>;

const RoundTripPageSchema = named(
  'RoundTripPage',
  Type.Object({
    items: Type.Array(ref(RoundTripSchema), { description: 'Newest close first' }),
    nextCursor: Type.Union([Type.String(), Type.Null()]),
  }),
);
export const RoundTripPage = ref(RoundTripPageSchema);

export const RoundTripQuery = Type.Object(
  {
    from: Type.Optional(CalendarDay('First closing trading day included')),
    to: Type.Optional(CalendarDay('Last closing trading day included')),
    symbol: Type.Optional(Symbol),
    tag: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_TAG })),
    side: Type.Optional(Type.Union([Type.Literal('long'), Type.Literal('short')])),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 300, description: 'The previous page’s nextCursor' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, description: 'Default 50' })),
  },
  { additionalProperties: false },
);
export type RoundTripQueryInput = Static<typeof RoundTripQuery>;

export const CsvBody = Type.String({
  description:
    'text/csv (RFC 4180), at most 5 MiB and 50,000 data rows; a header row names the columns symbol, side, quantity, price, fee, executedAt, ' +
    'externalId, note (any order and case; fee, externalId and note optional; side also B/S/BOT/SLD)',
});

export const JournalQuery = Type.Object(
  {
    from: Type.Optional(CalendarDay('First trading day included; default 29 days before `to`')),
    to: Type.Optional(CalendarDay('Last trading day included; default the account’s trading day now')),
    symbol: Type.Optional(
      Type.String({
        pattern: SYMBOL_PATTERN,
        description:
          'One symbol: totals and days over its round trips (each on its closing day, as a what-if), its open position only; the balance stays the account’s',
      }),
    ),
    exclude: Exclude,
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

const JournalTotalsSchema = named(
  'JournalTotals',
  Type.Object({
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
    averageR: Type.Union([Type.String(), Type.Null()], { description: 'Mean rMultiple of the round trips with a planned stop (4 places); null without one' }),
    expectancyR: Type.Union([Type.String(), Type.Null()], {
      description: 'Net P&L of the round trips with a planned stop over their initial risk: what one unit of risk earned (4 places); null without one',
    }),
  }),
);

const JournalSchema = named(
  'Journal',
  Type.Object({
    accountId: Uuid,
    currency: Type.String(),
    from: Day,
    to: Day,
    totals: ref(JournalTotalsSchema),
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
    exclude: Type.Optional(Type.Array(Type.String(), { description: 'The what-if’s exclusions, as asked (only with exclude=)' })),
    excluded: Type.Optional(
      Type.Object({ roundTrips: Count, netPnl: Money }, { description: 'What the exclusions removed from the range’s round trips (only with exclude=)' }),
    ),
  }),
);
export const Journal = ref(JournalSchema);
export type JournalDto = Static<typeof JournalSchema>;

export const ReportQuery = Type.Object(
  {
    from: Type.Optional(CalendarDay('First closing trading day included; default 29 days before `to`')),
    to: Type.Optional(CalendarDay('Last closing trading day included; default the account’s trading day now')),
    by: Type.Union(
      [Type.Literal('symbol'), Type.Literal('tag'), Type.Literal('side'), Type.Literal('weekday'), Type.Literal('hour'), Type.Literal('holdTime')],
      {
        description:
          'symbol, tag (a trip in each of its tags’ groups; null key untagged), side, weekday (mon…sun, of the opening), hour (00–23 of the opening), holdTime',
      },
    ),
    symbol: Type.Optional(Type.String({ pattern: SYMBOL_PATTERN, description: 'Only the round trips of this symbol' })),
    exclude: Exclude,
  },
  { additionalProperties: false },
);
export type ReportQueryInput = Static<typeof ReportQuery>;

const ReportSchema = named(
  'JournalReport',
  Type.Object({
    accountId: Uuid,
    currency: Type.String(),
    from: Day,
    to: Day,
    by: Type.String(),
    exclude: Type.Array(Type.String()),
    totals: ref(JournalTotalsSchema),
    groups: Type.Array(Type.Object({ key: Type.Union([Type.String(), Type.Null()]), totals: ref(JournalTotalsSchema) })),
  }),
);
export const Report = ref(ReportSchema);
export type ReportDto = Static<typeof ReportSchema>;

export const components: NamedSchema[] = [
  TradeSchema,
  TradePageSchema,
  ImportReportSchema,
  ImportFormatsSchema,
  JournalDaySchema,
  JournalTotalsSchema,
  JournalSchema,
  RoundTripSchema,
  RoundTripPageSchema,
  ReportSchema,
];
