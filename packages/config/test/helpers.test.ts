import { describe, expect, it } from 'vitest';
import { closestMatch, editDistance } from '../src/index.ts';

describe('did you mean', () => {
  it('counts a swap of neighbours as one edit', () => {
    expect(editDistance('kafak', 'kafka')).toBe(1);
    expect(editDistance('', 'abc')).toBe(3);
  });

  it('suggests only close candidates', () => {
    expect(closestMatch('maxAttempt', ['maxAttempts', 'batchSize'])).toBe('maxAttempts');
    expect(closestMatch('MAXATTEMPTS', ['maxAttempts'])).toBe('maxAttempts');
    expect(closestMatch('GET', ['POST', 'PUT', 'PATCH'])).toBeUndefined();
    expect(closestMatch('zzz', ['database'])).toBeUndefined();
  });
});
