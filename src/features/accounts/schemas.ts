import { Type, type Static } from 'typebox';
import { Instant } from '../../http/dates.ts';
import { IsoDateTime, named, ref, Uuid, type NamedSchema } from '../../http/schemas.ts';

/** The service trims names and takes 1 to 100 characters (service.ts); a longer string is refused up front. */
const NAME_MAX = 100;
const Name = Type.String({
  minLength: 1,
  maxLength: NAME_MAX,
  description:
    `Trimmed; 1 to ${NAME_MAX} characters; unique per user by what a reader sees: case, width, accent encoding, invisible ` +
    'characters, runs of spaces and Cyrillic/Greek look-alikes of Latin letters do not make a name distinct (409 ACCOUNT_NAME_TAKEN)',
});
const BrokerageName = Type.String({ minLength: 1, maxLength: NAME_MAX, description: `Trimmed; 1 to ${NAME_MAX} characters` });
const Currency = Type.String({ pattern: '^[A-Za-z]{3}$', description: 'ISO 4217 code; normalised to upper case' });
const Timezone = Type.String({ minLength: 1, maxLength: 64, description: 'IANA zone or link name; stored canonical' });
const StartingBalance = Type.String({ pattern: '^[0-9]{1,15}(\\.[0-9]{1,8})?$', description: 'Non-negative decimal string' });

const AccountSchema = named(
  'Account',
  Type.Object({
    id: Uuid,
    name: Type.String(),
    currency: Type.String(),
    timezone: Type.String(),
    brokerageId: Type.Union([Uuid, Type.Null()]),
    startingBalance: Type.String(),
    createdAt: IsoDateTime,
    updatedAt: IsoDateTime,
  }),
);
export const Account = ref(AccountSchema);
export type AccountDto = Static<typeof AccountSchema>;

export const CreateAccountBody = Type.Object(
  {
    name: Name,
    currency: Currency,
    timezone: Timezone,
    startingBalance: StartingBalance,
    brokerageId: Type.Optional(Type.Union([Uuid, Type.Null()])),
  },
  { additionalProperties: false },
);
export type CreateAccountInput = Static<typeof CreateAccountBody>;

/** Spec 4.4: only these four fields; startingBalance or anything else is refused. */
export const UpdateAccountBody = Type.Object(
  {
    name: Type.Optional(Name),
    currency: Type.Optional(Currency),
    timezone: Type.Optional(Timezone),
    brokerageId: Type.Optional(Type.Union([Uuid, Type.Null()])),
  },
  { additionalProperties: false },
);
export type UpdateAccountInput = Static<typeof UpdateAccountBody>;

const AccountListSchema = named('AccountList', Type.Object({ items: Type.Array(Account) }));
export const AccountList = ref(AccountListSchema);

export const TradingDayQuery = Type.Object(
  {
    at: Type.Optional(Instant('Instant to evaluate; default now. One whose day in the account’s timezone is after 9999-12-31 → 400 VALIDATION_ERROR')),
  },
  { additionalProperties: false },
);
const TradingDaySchema = named(
  'TradingDay',
  Type.Object({
    tradingDay: Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$' }),
    timezone: Type.String(),
  }),
);
export const TradingDay = ref(TradingDaySchema);

const BrokerageSchema = named('Brokerage', Type.Object({ id: Uuid, name: Type.String(), createdAt: IsoDateTime }));
export const Brokerage = ref(BrokerageSchema);
export type BrokerageDto = Static<typeof BrokerageSchema>;
export const CreateBrokerageBody = Type.Object({ name: BrokerageName }, { additionalProperties: false });
const BrokerageListSchema = named('BrokerageList', Type.Object({ items: Type.Array(Brokerage) }));
export const BrokerageList = ref(BrokerageListSchema);

const TimezoneListSchema = named(
  'TimezoneList',
  Type.Object({
    version: Type.String({ description: 'tzdb release the names come from' }),
    timezones: Type.Array(Type.String(), { description: 'canonical IANA zone names, sorted' }),
    links: Type.Record(Type.String(), Type.String(), {
      description: 'every other IANA name the service accepts (a link, e.g. Asia/Calcutta or US/Eastern), with the canonical zone an account given it stores',
    }),
  }),
);
export const TimezoneList = ref(TimezoneListSchema);

/** Registered as shared schemas (app.ts): `components.schemas` of the OpenAPI document. */
export const components: NamedSchema[] = [AccountSchema, AccountListSchema, TradingDaySchema, BrokerageSchema, BrokerageListSchema, TimezoneListSchema];
