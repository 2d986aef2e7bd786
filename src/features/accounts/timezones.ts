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

const wallFormatters = new Map<string, Intl.DateTimeFormat>();

/** The wall-clock fields of an instant in a zone, as the UTC epoch ms of the same fields (whole seconds). */
function wallClock(ms: number, zone: string): number {
  let f = wallFormatters.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
      era: 'short',
    });
    wallFormatters.set(zone, f);
  }
  const p: Record<string, number> = {};
  let bc = false;
  for (const part of f.formatToParts(ms)) {
    if (part.type === 'era') bc = part.value.startsWith('B');
    else if (part.type !== 'literal') p[part.type] = Number(part.value);
  }
  const year = bc ? 1 - (p['year'] ?? 0) : (p['year'] ?? 0);
  const d = new Date(0);
  d.setUTCFullYear(year, (p['month'] ?? 1) - 1, p['day'] ?? 1);
  d.setUTCHours(p['hour'] ?? 0, p['minute'] ?? 0, p['second'] ?? 0, 0);
  return d.getTime();
}

/** The zone's offset from UTC at an instant, in ms (east positive). */
const offsetAt = (ms: number, zone: string): number => wallClock(ms - (((ms % 1000) + 1000) % 1000), zone) - (ms - (((ms % 1000) + 1000) % 1000));

/**
 * The instant a wall-clock time names in a zone (`wall`: the fields as UTC epoch ms). A time that
 * happens twice (clocks set back) is its first occurrence; one that never happens (clocks set
 * forward) is moved forward by the gap — what Temporal calls "compatible".
 */
export function instantOfWallTime(wall: number, zone: string): number {
  const before = offsetAt(wall - 86_400_000, zone);
  const after = offsetAt(wall + 86_400_000, zone);
  const valid = [wall - before, wall - after].filter((t, i) => offsetAt(t, zone) === (i === 0 ? before : after));
  if (valid.length > 0) return Math.min(...valid);
  return wall - before;
}
