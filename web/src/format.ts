// Numbers, money and dates in the reader's locale, the same on every page (no DOM: unit-tested under node).
const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
const dateOnly = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium' });
export const fmtDateTime = (iso: string | null | undefined): string => (iso ? dateTime.format(new Date(iso)) : '—');
export const fmtDate = (iso: string | null | undefined): string => (iso ? dateOnly.format(new Date(iso)) : '—');
export const fmtNumber = (n: number | null | undefined, digits = 0): string =>
  n === null || n === undefined ? '—' : n.toLocaleString(undefined, { minimumFractionDigits: digits, maximumFractionDigits: digits });
export const fmtUsd = (n: number | null | undefined): string =>
  n === null || n === undefined
    ? '—'
    : n > 0 && n < 0.0001
      ? '< $0.0001'
      : n.toLocaleString(undefined, { style: 'currency', currency: 'USD', minimumFractionDigits: 2, maximumFractionDigits: n < 1 ? 4 : 2 });
/** A price in its currency's minor unit, as money: 500 usd → "$5.00". */
export const fmtMoney = (minor: number, currency: string): string =>
  (minor / 100).toLocaleString(undefined, { style: 'currency', currency: currency.toUpperCase() });
