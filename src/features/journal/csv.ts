// The CSV form of trades (DESIGN §14): the import's bounds, and cells and lines as the export writes
// them (reading is brokers/: every layout, ours included).

export const MAX_CSV_BYTES = 5 * 1024 * 1024;
export const MAX_CSV_ROWS = 50_000;

/**
 * One CSV cell (RFC 4180: quoted when it holds a comma, a quote or a line break). A cell a spreadsheet
 * would run as a formula — starting with =, +, - or @, or with a tab or carriage return (OWASP's list) —
 * is written with a leading '. So is one that starts with quotes before such a character, so that the
 * import, which takes exactly one ' away, reads every cell back as it was. No exported number can start
 * so (quantities, prices and fees are ≥ 0).
 */
function csvCell(value: string): string {
  const safe = /^'*[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
}

export const csvLine = (cells: readonly string[]): string => `${cells.map(csvCell).join(',')}\r\n`;
