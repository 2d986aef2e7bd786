// DESIGN §17: what brokers write is not always UTF-8. The bytes of an upload become text by their
// byte-order mark (UTF-8, UTF-16 LE or BE), else as UTF-8 when they are valid UTF-8, else as
// Windows-1252 (what Excel on Windows saves a "CSV" in; every byte is a character there, so it never fails).
import { isUtf8 } from 'node:buffer';

const utf16le = new TextDecoder('utf-16le');
const windows1252 = new TextDecoder('windows-1252');

export function decodeTradeFile(bytes: Buffer): string {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) return bytes.subarray(3).toString('utf8');
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return utf16le.decode(bytes.subarray(2));
  if (bytes[0] === 0xfe && bytes[1] === 0xff) {
    const swapped = Buffer.from(bytes.subarray(2, 2 + ((bytes.length - 2) & ~1)));
    return utf16le.decode(swapped.swap16());
  }
  return isUtf8(bytes) ? bytes.toString('utf8') : windows1252.decode(bytes);
}
