import { describe, expect, it } from 'vitest';
import { isStorableText, storableErrorText, unstorableText } from '../src/index.ts';

// One rule for the inbox (webhook bodies, broker headers) and the client (enqueue): what PostgreSQL keeps as it is.
describe('unstorableText', () => {
  it.each([
    ['plain text', 'orders.created'],
    ['an empty string', ''],
    ['a surrogate pair (an emoji)', 'ok \u{1F600}'],
    ['U+FFFD itself', '\uFFFD'],
  ])('accepts %s', (_, text) => {
    expect(unstorableText(text)).toBeUndefined();
    expect(isStorableText(text)).toBe(true);
  });

  it.each([
    ['U+0000', 'a\u0000b', 'nul'],
    ['a high surrogate at the end', 'a\uD83D', 'lone-surrogate'],
    ['a high surrogate before a letter', '\uD83Dx', 'lone-surrogate'],
    ['a low surrogate alone', 'x\uDE00', 'lone-surrogate'],
    ['two high surrogates', '\uD83D\uD83D', 'lone-surrogate'],
  ])('refuses %s', (_, text, problem) => {
    expect(unstorableText(text)).toBe(problem);
    expect(isStorableText(text)).toBe(false);
  });
});

// Error and reason texts are QueueBox's record, not the application's data: mended, never refused.
describe('storableErrorText', () => {
  it('keeps storable text as it is (the same string)', () => {
    const text = 'HTTP 503: busy \u{1F600}';
    expect(storableErrorText(text)).toBe(text);
  });

  it('turns every U+0000 and every unpaired surrogate into U+FFFD, keeping pairs', () => {
    expect(storableErrorText('a\u0000b\u0000')).toBe('a\uFFFDb\uFFFD');
    expect(storableErrorText('\uD83D\uD83D\uDE00x\uDE00')).toBe('\uFFFD\uD83D\uDE00x\uFFFD');
    expect(isStorableText(storableErrorText('\u0000\uD800\uDFFF\uDC00\uD800'))).toBe(true);
  });
});
