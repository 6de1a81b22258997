import { describe, expect, it } from 'vitest';
import { drainDeadline } from '../src/deadline.ts';

describe('drainDeadline', () => {
  it('is now + remaining − margin', () => {
    expect(drainDeadline(60_000, 1_000, 3_000)).toBe(58_000);
  });

  it('uses a 3000 ms margin by default', () => {
    expect(drainDeadline(10_000, 0)).toBe(7_000);
  });

  it('is now when less time remains than the margin', () => {
    expect(drainDeadline(2_000, 5_000, 3_000)).toBe(5_000);
  });
});
