/** The closed list of error codes and their one status each (DESIGN §3). */
export const ERROR_STATUS = {
  VALIDATION_ERROR: 400,
  MARKET_DATA_KEY_INVALID: 400,
  PROVIDER_KEY_INVALID: 400,
  UNKNOWN_PACK: 400,
  IMAGE_INVALID: 400,
  IMAGES_NOT_SUPPORTED: 400,
  INVALID_SIGNATURE: 400,
  UNAUTHENTICATED: 401,
  INSUFFICIENT_CREDITS: 402,
  ALLOWANCE_EXHAUSTED: 402,
  INSUFFICIENT_CREDITS_ALLOWANCE_AVAILABLE: 402,
  MODEL_NOT_AVAILABLE: 402,
  BILLING_NOT_AVAILABLE: 402,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  ACCOUNT_NOT_FOUND: 404,
  BROKERAGE_NOT_FOUND: 404,
  CONVERSATION_NOT_FOUND: 404,
  ATTACHMENT_NOT_FOUND: 404,
  PROVIDER_KEY_NOT_FOUND: 404,
  MARKET_DATA_KEY_NOT_FOUND: 404,
  CHECKOUT_NOT_FOUND: 404,
  ACCOUNT_NAME_TAKEN: 409,
  STREAM_IN_PROGRESS: 409,
  PROVIDER_KEY_NOT_CONFIGURED: 409,
  PROVIDER_KEY_DECRYPTION_FAILED: 409,
  CLIENT_MESSAGE_ID_REUSED: 409,
  TRADE_EXTERNAL_ID_REUSED: 409,
  REQUEST_TIMEOUT: 408,
  PAYLOAD_TOO_LARGE: 413,
  IMAGE_TOO_LARGE: 413,
  URI_TOO_LONG: 414,
  HEADERS_TOO_LARGE: 431,
  RATE_LIMITED: 429,
  TIER_LIMIT_IMAGES: 429,
  PROVIDER_UNAVAILABLE: 502,
  PAYMENT_PROVIDER_ERROR: 502,
  UPSTREAM_TIMEOUT: 504,
  SERVICE_UNAVAILABLE: 503,
  INTERNAL: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface ErrorDetail {
  path: string;
  message: string;
}

/** Throw this anywhere; the one error handler turns it into the envelope and status. */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details: ErrorDetail[] | undefined;
  /** Extra response headers (Retry-After, RateLimit-*). */
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message: string, opts: { details?: ErrorDetail[]; headers?: Record<string, string>; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'AppError';
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.details = opts.details;
    this.headers = opts.headers ?? {};
  }
}

export interface ErrorEnvelope {
  error: { code: ErrorCode; message: string; requestId: string; details?: ErrorDetail[] };
}

export function envelope(err: AppError, requestId: string): ErrorEnvelope {
  return {
    error: {
      code: err.code,
      message: err.message,
      requestId,
      ...(err.details && err.details.length > 0 ? { details: err.details } : {}),
    },
  };
}
