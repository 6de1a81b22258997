import { describe, expect, it } from 'vitest';
import { mergeHeaders } from '../src/headers.ts';
import { createSemaphore } from '../src/semaphore.ts';

describe('createSemaphore', () => {
  it('never runs more than its limit at once and runs every task', async () => {
    // Prepare
    const semaphore = createSemaphore(3);
    let running = 0;
    let most = 0;
    const task = async (i: number) => {
      running++;
      most = Math.max(most, running);
      await new Promise((resolve) => setImmediate(resolve));
      running--;
      return i;
    };
    // Act
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => semaphore.run(() => task(i))));
    // Assess
    expect(most).toBe(3);
    expect(results).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(semaphore.active).toBe(0);
    expect(semaphore.waiting).toBe(0);
  });

  it('frees the slot of a task that throws', async () => {
    const semaphore = createSemaphore(1);
    await expect(semaphore.run(() => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    await expect(semaphore.run(async () => 'next')).resolves.toBe('next');
  });
});

describe('mergeHeaders', () => {
  it('adds headers and replaces those of the same name in any letter case', () => {
    expect(
      mergeHeaders({ 'Content-Type': 'text/plain', 'X-A': '1' }, { 'content-type': 'application/json' }),
    ).toEqual({ 'X-A': '1', 'content-type': 'application/json' });
    const base = { a: '1' };
    expect(mergeHeaders(base, undefined)).toBe(base);
  });
});
