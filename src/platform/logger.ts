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
 * Lines wait in chunks of 2 KiB while a write is under way, not pino's 16: each line appended measures its chunk's
 * bytes, which copies the chunk whole, and under unicast load that was 5.6 KB allocated a request for a 250-byte line.
 */
export function createLogger(level: string, to: 'stdout' | 'stderr' = 'stdout'): Logger {
  const options = { level, redact: { paths: redactPaths, censor: '[redacted]' } };
  return pino(options, pino.destination({ dest: to === 'stdout' ? 1 : 2, maxWrite: 2048 }));
}

export type { Logger };
