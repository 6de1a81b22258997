import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { readBody } from '../src/body.ts';

function aStream(chunks: readonly string[]): Readable {
  return Readable.from(chunks.map((c) => Buffer.from(c)));
}

describe('readBody', () => {
  it('answers the bytes of a body within the limit', async () => {
    const result = await readBody(aStream(['{"a":', '1}']), { maxBytes: 7, contentLength: '7' });

    expect(result.ok && Buffer.from(result.body).toString()).toBe('{"a":1}');
  });

  it('refuses a declared Content-Length over the limit without reading a byte', async () => {
    const stream = aStream(['x'.repeat(10)]);

    const result = await readBody(stream, { maxBytes: 5, contentLength: '10' });

    expect(result).toEqual({ ok: false, reason: 'too_large' });
    expect(stream.readableFlowing).toBe(null);
  });

  it('stops reading a body without a length once it passes the limit, pausing but not destroying it', async () => {
    const stream = aStream(['abc', 'def', 'ghi', 'jkl']);

    const result = await readBody(stream, { maxBytes: 5 });

    expect(result).toEqual({ ok: false, reason: 'too_large' });
    expect(stream.isPaused()).toBe(true);
    expect(stream.destroyed).toBe(false);
  });

  it('rejects when the stream fails', async () => {
    const stream = new Readable({
      read() {
        this.destroy(new Error('client went away'));
      },
    });

    await expect(readBody(stream, { maxBytes: 5 })).rejects.toThrow('client went away');
  });
});
