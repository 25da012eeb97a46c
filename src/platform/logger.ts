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
  '*.hms_credentials',
  '*.client_secret',
  '*.private_key',
  '*.apiKey',
  'apns.key',
  'fcm.private_key',
];

/**
 * JSON lines on stdout (the server's log stream), or on stderr where stdout carries a program's answer (the CLI).
 * While a write is under way, lines wait in chunks of 2 KiB, not sonic-boom's 16: appending a line measures its
 * chunk's bytes, which copies the chunk whole (docs/performance.md, note 32).
 */
export function createLogger(level: string, to: 'stdout' | 'stderr' = 'stdout'): Logger {
  const options = { level, redact: { paths: redactPaths, censor: '[redacted]' } };
  return pino(options, pino.destination({ dest: to === 'stdout' ? 1 : 2, maxWrite: 2048 }));
}

export type { Logger };
