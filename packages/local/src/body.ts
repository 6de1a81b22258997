import type { Readable } from 'node:stream';

/** What {@link readBody} found: the bytes, or that the body is larger than allowed. */
export type BodyResult =
  | { readonly ok: true; readonly body: Uint8Array }
  | { readonly ok: false; readonly reason: 'too_large' };

/**
 * Reads a request body into one buffer, but never more than `maxBytes`: a declared `Content-Length` above the
 * limit is refused before a byte is read, and a body without one (chunked) stops being read as soon as it passes
 * the limit: the stream is paused, not destroyed, so the caller can still answer 413 on the same connection and
 * then deal with the rest of the body. Rejects when the stream fails (the client went away).
 */
export function readBody(
  stream: Readable,
  options: { readonly maxBytes: number; readonly contentLength?: string | undefined },
): Promise<BodyResult> {
  const { maxBytes } = options;
  if (options.contentLength !== undefined) {
    const declared = Number(options.contentLength);
    if (Number.isFinite(declared) && declared > maxBytes) {
      return Promise.resolve({ ok: false, reason: 'too_large' });
    }
  }
  return new Promise((resolve, reject) => {
    reads.set(stream, { maxBytes, chunks: [], total: 0, resolve, reject });
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('error', onError);
  });
}

/** A body being read: what the stream's listeners share. */
interface BodyRead {
  readonly maxBytes: number;
  readonly chunks: Buffer[];
  total: number;
  readonly resolve: (result: BodyResult) => void;
  readonly reject: (error: Error) => void;
}

// The listeners are module functions (the stream is their `this`) rather than closures made per request: each
// webhook read a body through three closures, and under tsx every named closure also costs a `__name` call
// (Object.defineProperty) when it is created, about 2% of the runtime's CPU per webhook in a profile.
const reads = new WeakMap<Readable, BodyRead>();

function finish(stream: Readable): BodyRead | undefined {
  const read = reads.get(stream);
  reads.delete(stream);
  stream.off('data', onData);
  stream.off('end', onEnd);
  stream.off('error', onError);
  return read;
}

function onData(this: Readable, chunk: Buffer | string): void {
  const read = reads.get(this);
  if (read === undefined) return;
  const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
  read.total += bytes.byteLength;
  if (read.total > read.maxBytes) {
    finish(this);
    // Breaking out of an async iterator would destroy the socket before the 413 could be written.
    this.pause();
    read.resolve({ ok: false, reason: 'too_large' });
    return;
  }
  read.chunks.push(bytes);
}

function onEnd(this: Readable): void {
  const read = finish(this);
  read?.resolve({ ok: true, body: Buffer.concat(read.chunks, read.total) });
}

function onError(this: Readable, error: Error): void {
  finish(this)?.reject(error);
}
