import { AppError } from '../../http/errors.ts';
import type { ChatImage, ImageFormat } from '../../providers/llm/index.ts';

export interface ImageInput {
  readonly format: ImageFormat;
  readonly dataBase64: string;
}

// Buffer.from(…, 'base64') silently skips characters outside the alphabet; the strict form is checked first.
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

function matchesFormat(format: ImageFormat, b: Buffer): boolean {
  switch (format) {
    case 'png':
      return b.length > PNG.length && b.subarray(0, PNG.length).equals(PNG);
    case 'jpeg':
      return b.length > 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff;
    case 'webp':
      return b.length > 12 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP';
  }
}

/** Decoded size of a base64 string that passed BASE64, without decoding it. */
function decodedLength(s: string): number {
  let padding = 0;
  if (s.endsWith('==')) padding = 2;
  else if (s.endsWith('=')) padding = 1;
  return Math.floor(((s.length - padding) * 3) / 4);
}

/**
 * DESIGN §7, per image in order: undecodable base64 → 400 IMAGE_INVALID; decoded size above the cap →
 * 413 IMAGE_TOO_LARGE (checked before decoding, so an oversized image is never materialised);
 * bytes that are not the declared format → 400 IMAGE_INVALID.
 */
export function decodeImages(inputs: readonly ImageInput[], maxBytes: number): ChatImage[] {
  return inputs.map((input, i) => {
    const path = `/attachments/${i}/dataBase64`;
    const s = input.dataBase64;
    const unpadded = s.length - (s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0);
    if (!BASE64.test(s) || unpadded % 4 === 1 || (s.includes('=') && s.length % 4 !== 0)) {
      throw new AppError('IMAGE_INVALID', `attachment ${i} is not valid base64`, { details: [{ path, message: 'is not valid base64' }] });
    }
    if (decodedLength(s) > maxBytes) {
      throw new AppError('IMAGE_TOO_LARGE', `attachment ${i} is larger than ${maxBytes} bytes`, {
        details: [{ path, message: `decodes to more than ${maxBytes} bytes` }],
      });
    }
    const data = Buffer.from(s, 'base64');
    if (!matchesFormat(input.format, data)) {
      throw new AppError('IMAGE_INVALID', `attachment ${i} is not a ${input.format} image`, {
        details: [{ path, message: `bytes are not a ${input.format} image` }],
      });
    }
    return { format: input.format, data };
  });
}

export const CONTENT_TYPE: Record<ImageFormat, string> = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp' };
