/**
 * The runtime seen from outside: secrets in its output, raw HTTP over a socket, a webhook sender that retries like
 * a real provider, and a chunked upload.
 * Nothing here imports vitest, so bench/soak.ts can use it too.
 */
import { connect } from 'node:net';
import type { QueueBoxProcess } from '../../local/support.ts';

// ------------------------------------------------------------------------------------------------------------
// Secrets in output

/** Everything a runtime process wrote: its JSON log lines and its stderr. */
export function outputOf(process: QueueBoxProcess): string {
  return `${process.logs.map((line) => JSON.stringify(line)).join('\n')}\n${process.stderr()}`;
}

/**
 * The secrets that occur in `text`, by label. Each secret is looked for as written and, for Standard Webhooks
 * secrets (`whsec_…`), also as its bare base64 part; JSON escaping of the log is undone first.
 */
export function leakedSecrets(text: string, secrets: Readonly<Record<string, string>>): string[] {
  const leaks: string[] = [];
  for (const [label, secret] of Object.entries(secrets)) {
    const forms = new Set([secret, JSON.stringify(secret).slice(1, -1)]);
    if (secret.startsWith('whsec_')) forms.add(secret.slice('whsec_'.length));
    for (const form of forms) {
      if (form.length >= 6 && text.includes(form)) {
        leaks.push(label);
        break;
      }
    }
  }
  return leaks;
}

// ------------------------------------------------------------------------------------------------------------
// Raw HTTP

/** What came back on a raw socket. */
export interface RawAnswer {
  /** The status of the first response, or undefined when the server closed without one. */
  readonly status: number | undefined;
  /** Everything received, as latin1 text. */
  readonly text: string;
  /** Whether the server closed the connection (rather than our timeout ending the wait). */
  readonly closed: boolean;
}

/**
 * Writes `request` (bytes as given, nothing added) to 127.0.0.1:`port` and collects the answer until the server
 * closes the connection, a complete response with Content-Length arrived (and no `Connection: close`), or
 * `timeoutMs` passed.
 */
export function rawHttp(port: number, request: Buffer | string, timeoutMs = 5000): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const chunks: Buffer[] = [];
    let settled = false;
    const finish = (closed: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(text);
      resolve({ status: match ? Number(match[1]) : undefined, text, closed });
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      const text = Buffer.concat(chunks).toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      const head = text.slice(0, end === -1 ? undefined : end);
      const length = /\r\ncontent-length: *(\d+)/i.exec(head);
      // An answer that says it closes the connection is waited on until it does (`closed` tells whether it did).
      const closing = /\r\nconnection: *close/i.test(head);
      if (
        end !== -1 &&
        length &&
        !closing &&
        Buffer.byteLength(text, 'latin1') >= end + 4 + Number(length[1])
      ) {
        finish(false);
      }
    });
    socket.on('error', () => finish(true));
    socket.on('close', () => finish(true));
    socket.write(request);
  });
}

// ------------------------------------------------------------------------------------------------------------
// A webhook sender that behaves like a real provider: it retries until the inbox takes the message

/** What a {@link startWebhookSender} run did. */
export interface WebhookSenderReport {
  /** Webhook ids the inbox took (202, or 200 duplicate for a retry of a message it had stored), in order. */
  readonly accepted: readonly string[];
  /** Answers by status (503 while the database is down, …), counting every try. */
  readonly statuses: Readonly<Record<string, number>>;
  /** Tries that failed without an HTTP answer. */
  readonly networkErrors: number;
}

/** A running sender: stop() lets each key's loop finish its current message, then resolves with the report. */
export interface WebhookSender {
  /** Webhooks taken so far. */
  readonly acceptedCount: () => number;
  stop(): Promise<WebhookSenderReport>;
}

/**
 * Posts Standard Webhooks signed messages to `url`, one loop per key (a key's messages one after another, each
 * retried every 100 ms until the inbox answers 202 or 200), `gapMs` between messages of a loop, until `stop()`.
 * Payload `{ type, agg: key, seq, run }`; webhook id `<run>-<key>-<seq>`.
 */
export function startWebhookSender(options: {
  readonly url: string;
  readonly secret: string;
  readonly keys: number;
  readonly run: string;
  readonly gapMs: number;
  readonly sign: (id: string, body: string, secret: string) => Record<string, string>;
}): WebhookSender {
  const accepted: string[] = [];
  const statuses: Record<string, number> = {};
  let networkErrors = 0;
  let stopping = false;
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  const loop = async (key: string) => {
    for (let seq = 0; !stopping; seq += 1) {
      const id = `${options.run}-${key}-${seq}`;
      const body = JSON.stringify({ type: 'order.changed', agg: key, seq, run: options.run });
      for (;;) {
        try {
          const response = await fetch(options.url, {
            method: 'POST',
            headers: options.sign(id, body, options.secret),
            body,
          });
          await response.arrayBuffer();
          statuses[response.status] = (statuses[response.status] ?? 0) + 1;
          if (response.status === 202 || response.status === 200) break;
        } catch {
          networkErrors += 1;
        }
        await pause(100);
      }
      accepted.push(id);
      await pause(options.gapMs);
    }
  };
  const loops = Array.from({ length: options.keys }, (_, i) => loop(`w${i}`));
  return {
    acceptedCount: () => accepted.length,
    async stop() {
      stopping = true;
      await Promise.all(loops);
      return { accepted, statuses, networkErrors };
    },
  };
}

/** What {@link streamChunked} saw. */
export interface StreamedAnswer {
  /** The status of a response that reached us, or undefined (the server may reset the connection first). */
  readonly status: number | undefined;
  /** Body bytes written before the connection closed. */
  readonly written: number;
  /** Whether the connection closed before the whole body was written. */
  readonly cutShort: boolean;
}

/**
 * POSTs `total` bytes of body in 64 KiB chunks (Transfer-Encoding: chunked, no Content-Length) to `path`, as fast
 * as the socket takes them, and reports how far it got and what came back.
 */
export function streamChunked(port: number, path: string, total: number): Promise<StreamedAnswer> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    let received = '';
    let written = 0;
    let finished = false;
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      const match = /^HTTP\/1\.1 (\d{3})/.exec(received);
      resolve({ status: match ? Number(match[1]) : undefined, written, cutShort: !finished });
    });
    socket.write(
      `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
    );
    const chunk = `${(64 * 1024).toString(16)}\r\n${'a'.repeat(64 * 1024)}\r\n`;
    const pump = () => {
      while (written < total && !socket.destroyed) {
        written += 64 * 1024;
        if (!socket.write(chunk)) {
          socket.once('drain', pump);
          return;
        }
      }
      if (!socket.destroyed) {
        finished = true;
        socket.end('0\r\n\r\n');
      }
    };
    pump();
  });
}
