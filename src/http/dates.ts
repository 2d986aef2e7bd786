import { Type } from 'typebox';

/**
 * Days and instants a client sends (DESIGN §10): years 1970–9999, so every day the service reads or
 * writes is `YYYY-MM-DD` with four digits and every instant is one the database and `Date` hold.
 * The validator compiler checks the `date` and `date-time` formats with these rules (validation.ts).
 */
const FIRST_DAY = '1970-01-01';
export const LAST_DAY = '9999-12-31';
const FIRST_MS = Date.UTC(1970, 0, 1);
const END_MS = Date.UTC(10000, 0, 1);

const DAY = /^\d{4}-\d{2}-\d{2}$/;
const INSTANT = /^(\d{4}-\d{2}-\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d{1,9})?(?:[Zz]|[+-](\d{2}):(\d{2}))$/;

/** A day as the service writes it: four-digit year. */
export function isFourDigitDay(text: string): boolean {
  return DAY.test(text);
}

/** A real calendar date (`2025-02-30` is not one; `Date.parse` alone would take it). */
function isCalendarDay(text: string): boolean {
  const ms = Date.parse(`${text}T00:00:00Z`);
  return !Number.isNaN(ms) && new Date(ms).toISOString().slice(0, 10) === text;
}

/** `YYYY-MM-DD`, a real calendar date from 1970-01-01 to 9999-12-31. */
export function isBoundedDay(text: string): boolean {
  return DAY.test(text) && text >= FIRST_DAY && isCalendarDay(text);
}

/**
 * An RFC 3339 date-time with `Z` or a `±hh:mm` offset, from 1970-01-01T00:00:00Z to
 * 9999-12-31T23:59:59.999Z. A leap second (`23:59:60`) is refused: `Date` cannot hold one.
 */
export function isBoundedInstant(text: string): boolean {
  const m = INSTANT.exec(text);
  if (!m || !isCalendarDay(m[1] ?? '')) return false;
  if (Number(m[2]) > 23 || Number(m[3]) > 59 || Number(m[4]) > 59 || Number(m[5] ?? 0) > 23 || Number(m[6] ?? 0) > 59) return false;
  const ms = Date.parse(text);
  return ms >= FIRST_MS && ms < END_MS;
}

/** A day parameter (`format: date`), bounded as above. */
export const CalendarDay = (description: string) =>
  Type.String({ format: 'date', description: `${description}; a calendar date from ${FIRST_DAY} to ${LAST_DAY}` });

/** An instant parameter (`format: date-time`), bounded as above. */
export const Instant = (description: string) =>
  Type.String({ format: 'date-time', description: `${description}; RFC 3339, from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z` });
