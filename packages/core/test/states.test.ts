import { describe, expect, it } from 'vitest';
import {
  assertTransition,
  canTransition,
  INBOX_TRANSITIONS,
  InvalidTransitionError,
  isFinal,
  MessageState,
  OUTBOX_TRANSITIONS,
  STATE_COLUMN_WIDTH,
  stateFromLiteral,
  stateLiteral,
} from '../src/index.ts';

describe('state literals', () => {
  it('maps Sent to sent in the outbox and processed in the inbox', () => {
    expect(stateLiteral('outbox', MessageState.Sent)).toBe('sent');
    expect(stateLiteral('inbox', MessageState.Sent)).toBe('processed');
    expect(stateFromLiteral('outbox', 'sent')).toBe(MessageState.Sent);
    expect(stateFromLiteral('inbox', 'processed')).toBe(MessageState.Sent);
  });

  it('round-trips every stored state on both tables', () => {
    for (const table of ['outbox', 'inbox'] as const) {
      for (const state of ['Pending', 'Processing', 'Sent', 'Dead'] as const) {
        const literal = stateLiteral(table, state);
        expect(literal.length).toBeLessThanOrEqual(STATE_COLUMN_WIDTH);
        expect(stateFromLiteral(table, literal)).toBe(state);
      }
    }
  });

  it('reads unknown literals, and the other table’s literal, as Failed', () => {
    expect(stateFromLiteral('outbox', 'processed')).toBe(MessageState.Failed);
    expect(stateFromLiteral('inbox', 'sent')).toBe(MessageState.Failed);
    expect(stateFromLiteral('outbox', 'PENDING')).toBe(MessageState.Failed);
    expect(stateFromLiteral('inbox', '')).toBe(MessageState.Failed);
  });

  it('never writes Failed', () => {
    expect(() => stateLiteral('outbox', MessageState.Failed)).toThrow(/never written/);
  });
});

describe('transition tables', () => {
  it('hold exactly the rows of the specification', () => {
    const rows = (t: typeof OUTBOX_TRANSITIONS) => t.map((r) => `${r.from}->${r.to}`).sort();
    expect(rows(OUTBOX_TRANSITIONS)).toEqual(
      [
        'new->Pending',
        'Pending->Processing',
        'Processing->Sent',
        'Processing->Pending',
        'Processing->Dead',
      ].sort(),
    );
    expect(rows(INBOX_TRANSITIONS)).toEqual(
      [
        'new->Pending',
        'new->Dead',
        'Pending->Processing',
        'Processing->Sent',
        'Processing->Pending',
        'Processing->Processing',
        'Processing->Dead',
      ].sort(),
    );
  });

  it('refuses transitions that are not in the table', () => {
    expect(() => assertTransition('outbox', 'Sent', 'Pending')).toThrow(InvalidTransitionError);
    expect(() => assertTransition('outbox', 'Dead', 'Pending')).toThrow(InvalidTransitionError);
    expect(() => assertTransition('outbox', 'Pending', 'Sent')).toThrow(InvalidTransitionError);
    expect(() => assertTransition('outbox', 'new', 'Dead')).toThrow(InvalidTransitionError);
    expect(() => assertTransition('outbox', 'Processing', 'Processing')).toThrow(InvalidTransitionError);
    expect(() => assertTransition('inbox', 'Failed', 'Processing')).toThrow(InvalidTransitionError);
    expect(() => assertTransition('inbox', 'Processing', 'Processing')).not.toThrow();
    expect(canTransition('inbox', 'new', 'Dead')).toBe(true);
  });

  it('treats sent/processed and dead as final', () => {
    for (const table of ['outbox', 'inbox'] as const) {
      expect(isFinal(table, 'Sent')).toBe(true);
      expect(isFinal(table, 'Dead')).toBe(true);
      expect(isFinal(table, 'Pending')).toBe(false);
      expect(isFinal(table, 'Processing')).toBe(false);
    }
  });
});
