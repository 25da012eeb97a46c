import { pino, type Logger } from 'pino';

/** Paths that may carry secrets; pino replaces them before a line is written. */
export const redactPaths = [
  'req.headers.authorization',
  'headers.authorization',
  '*.password',
  '*.key',
  '*.privateKey',
  '*.keyPem',
  '*.apns_credentials',
  '*.fcm_credentials',
  '*.private_key',
  '*.apiKey',
  'apns.key',
  'fcm.private_key',
];

export function createLogger(level: string): Logger {
  return pino({ level, redact: { paths: redactPaths, censor: '[redacted]' } });
}

export type { Logger };
