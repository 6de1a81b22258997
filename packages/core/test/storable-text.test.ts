import { describe, expect, it } from 'vitest';
import { isStorableText, unstorableText } from '../src/index.ts';

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
