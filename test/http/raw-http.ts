import net from 'node:net';

/** One HTTP/1.1 answer as it came on the wire. */
export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** What a connection received: its bytes, the answers they hold, and how it ended. */
export interface RawExchange {
  answers: RawAnswer[];
  /** Bytes after the last whole answer (a part of one, or bytes that are no answer). */
  rest: string;
  /** The socket error the client saw (ECONNRESET, EPIPE), if any, and when (ms after the first write). */
  error?: string;
  errorAfterMs?: number;
  /** The server closed the connection (within the wait). */
  closed: boolean;
}

/**
 * Sends bytes on a fresh connection (a number in `parts` waits that many ms) and reads until the server closes it or
 * `waitMs` pass. The client reads all along (unless told otherwise) and does not close its side first, as HTTP clients
 * do.
 */
export async function rawExchange(
  port: number,
  parts: (string | Buffer | number)[],
  opts: {
    waitMs?: number;
    head?: boolean;
    until?: (x: RawExchange) => boolean;
    keepSending?: boolean;
    readAfterSending?: boolean;
  } = {},
): Promise<RawExchange> {
  // keepSending: the client goes on sending after the server closed its side (allowHalfOpen), as one still
  // writing a body does
  const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: opts.keepSending ?? false });
  // readAfterSending: the client reads nothing until all it sends is sent, as clients that write a whole request
  // before reading its answer do
  if (opts.readAfterSending) socket.pause();
  const chunks: Buffer[] = [];
  let error: string | undefined;
  let errorAfterMs: number | undefined;
  let closed = false;
  const started = Date.now();
  const read = (): RawExchange => ({ ...parseAnswers(Buffer.concat(chunks), opts.head ?? false), error, errorAfterMs, closed });
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, opts.waitMs ?? 2000);
    const done = () => {
      clearTimeout(timer);
      resolve();
    };
    socket.on('data', (d) => {
      chunks.push(d);
      if (opts.until?.(read())) done();
    });
    socket.on('error', (e: NodeJS.ErrnoException) => {
      error ??= e.code ?? e.message;
      errorAfterMs ??= Date.now() - started;
    });
    socket.on('close', () => {
      closed = true;
      done();
    });
    void (async () => {
      for (const part of parts) {
        if (socket.destroyed) return;
        if (typeof part === 'number') await new Promise((r) => setTimeout(r, part));
        else socket.write(part);
      }
      if (opts.readAfterSending) socket.write('', () => socket.resume());
    })();
  });
  socket.destroy();
  return read();
}

/** Splits bytes into HTTP/1.1 answers (framed by Content-Length; an answer to HEAD has no body). */
export function parseAnswers(bytes: Buffer, head: boolean): { answers: RawAnswer[]; rest: string } {
  const answers: RawAnswer[] = [];
  let text = bytes.toString('latin1');
  for (;;) {
    const end = text.indexOf('\r\n\r\n');
    const status = /^HTTP\/1\.1 (\d{3}) /.exec(text);
    if (end < 0 || !status) break;
    const headers: Record<string, string> = {};
    for (const line of text.slice(0, end).split('\r\n').slice(1)) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = head ? 0 : Number(headers['content-length'] ?? 0);
    if (text.length < end + 4 + length) break;
    answers.push({ status: Number(status[1]), headers, body: text.slice(end + 4, end + 4 + length) });
    text = text.slice(end + 4 + length);
  }
  return { answers, rest: text };
}

/** The head of a request, lines joined with CRLF and ended by an empty line. */
export function requestHead(...lines: string[]): string {
  return `${lines.join('\r\n')}\r\n\r\n`;
}
