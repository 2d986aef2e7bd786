import { createRequire } from 'node:module';

/**
 * Canonical IANA zone names. The runtime's ICU keeps some old names as canonical (Asia/Calcutta),
 * so the IANA database itself (the `tzdata` package, tzdb release in its version field) decides:
 * a link resolves to the zone it points to.
 */
interface TzData {
  version: string;
  zones: Record<string, unknown>;
}

const tz = createRequire(import.meta.url)('tzdata/timezone-data.json') as TzData;

let canonicalByLowerName: Map<string, string> | undefined;

function table(): Map<string, string> {
  if (canonicalByLowerName) return canonicalByLowerName;
  const map = new Map<string, string>();
  const resolve = (name: string): string => {
    let current = name;
    for (let hops = 0; hops < 8; hops++) {
      const entry = tz.zones[current];
      if (typeof entry !== 'string') return current;
      current = entry;
    }
    return current;
  };
  for (const name of Object.keys(tz.zones)) map.set(name.toLowerCase(), resolve(name));
  canonicalByLowerName = map;
  return map;
}

const usable = new Map<string, boolean>();
function runtimeKnows(zone: string): boolean {
  let ok = usable.get(zone);
  if (ok === undefined) {
    try {
      new Intl.DateTimeFormat('en-US', { timeZone: zone });
      ok = true;
    } catch {
      ok = false;
    }
    usable.set(zone, ok);
  }
  return ok;
}

let canonicalList: { version: string; timezones: string[]; links: Record<string, string> } | undefined;

/**
 * Every canonical zone the runtime can evaluate, sorted, with the tzdb release they come from, and
 * every other name the service accepts (a link: Asia/Calcutta, US/Eastern) with the zone it stores.
 */
export function canonicalTimezones(): { version: string; timezones: string[]; links: Record<string, string> } {
  if (canonicalList) return canonicalList;
  const links: Record<string, string> = {};
  for (const name of Object.keys(tz.zones).sort()) {
    const canonical = canonicalTimezone(name);
    if (canonical !== undefined && canonical !== name) links[name] = canonical;
  }
  canonicalList = { version: tz.version, timezones: [...new Set(table().values())].filter(runtimeKnows).sort(), links };
  return canonicalList;
}

/** The canonical zone for any IANA zone or link name (case-insensitive), or undefined. */
export function canonicalTimezone(input: string): string | undefined {
  const canonical = table().get(input.trim().toLowerCase());
  // A zone the runtime cannot evaluate would make trading-day evaluation fail later; refuse it now.
  return canonical !== undefined && runtimeKnows(canonical) ? canonical : undefined;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

/** The calendar date (YYYY-MM-DD) of an instant in a zone. */
export function calendarDate(at: Date, zone: string): string {
  let f = formatters.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-CA', { timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit' });
    formatters.set(zone, f);
  }
  const parts = Object.fromEntries(f.formatToParts(at).map((p) => [p.type, p.value]));
  return `${parts['year']}-${parts['month']}-${parts['day']}`;
}

/** A zone change: `timezone` is in force from `from` on (accounts keep every one, DESIGN §9). */
export interface TimezoneChange {
  readonly timezone: string;
  readonly from: Date;
}

/**
 * The zone in force at `at` (epoch ms) under a history sorted oldest first: the latest change at or
 * before it; an instant before the first change (before the account existed) takes the first zone.
 */
export function zoneAt(history: readonly TimezoneChange[], at: number): string | undefined {
  let zone = history[0]?.timezone;
  for (const change of history) {
    if (change.from.getTime() > at) break;
    zone = change.timezone;
  }
  return zone;
}
