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
    const chunks: Buffer[] = [];
    let total = 0;
    const cleanup = () => {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
    };
    const onData = (chunk: Buffer | string) => {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      total += bytes.byteLength;
      if (total > maxBytes) {
        cleanup();
        // Breaking out of an async iterator would destroy the socket before the 413 could be written.
        stream.pause();
        resolve({ ok: false, reason: 'too_large' });
        return;
      }
      chunks.push(bytes);
    };
    const onEnd = () => {
      cleanup();
      resolve({ ok: true, body: Buffer.concat(chunks, total) });
    };
    const onError = (error: Error) => {
      cleanup();
      reject(error);
    };
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('error', onError);
  });
}
