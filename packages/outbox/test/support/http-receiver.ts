import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request as the receiver saw it. */
export interface ReceivedRequest {
  readonly method: string;
  readonly url: string;
  /** Lower-case names, as node:http gives them. */
  readonly headers: Record<string, string>;
  /** Names and values as sent, in order (`rawHeaders` of node:http: a header sent twice is there twice). */
  readonly rawHeaders: readonly string[];
  readonly body: string;
}

/** Decides the answer to a request; may take its time. */
export type ReceiverHandler = (request: ReceivedRequest, response: ServerResponse) => void | Promise<void>;

/** A real HTTP server on 127.0.0.1, on a free port, recording what it receives. */
export interface HttpReceiver {
  readonly url: string;
  readonly requests: ReceivedRequest[];
  /** Most requests being handled at the same moment. */
  readonly maxInFlight: number;
  /** TCP connections accepted so far. */
  readonly connections: number;
  handle(handler: ReceiverHandler): void;
  /** Forgets the recorded requests and answers 200 again. */
  reset(): void;
  close(): Promise<void>;
}

/** Starts a receiver that answers 200 until told otherwise. */
export async function startHttpReceiver(): Promise<HttpReceiver> {
  const requests: ReceivedRequest[] = [];
  const answerOk: ReceiverHandler = (_request, response) => {
    response.writeHead(200).end('ok');
  };
  let handler = answerOk;
  let inFlight = 0;
  let maxInFlight = 0;
  let connections = 0;

  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    let done = false;
    const finished = () => {
      if (!done) inFlight--;
      done = true;
    };
    res.on('finish', finished);
    res.on('close', finished);
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
      }
      const request = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers,
        rawHeaders: req.rawHeaders,
        body: Buffer.concat(chunks).toString(),
      };
      requests.push(request);
      Promise.resolve(handler(request, res)).catch((error: unknown) => {
        res.destroy(error instanceof Error ? error : new Error(String(error)));
      });
    });
  });
  server.on('connection', () => {
    connections++;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}/hooks`,
    requests,
    get maxInFlight() {
      return maxInFlight;
    },
    get connections() {
      return connections;
    },
    handle(next) {
      handler = next;
    },
    reset() {
      requests.length = 0;
      handler = answerOk;
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** A port on 127.0.0.1 that nothing listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
