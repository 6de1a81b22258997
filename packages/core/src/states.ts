import { InvalidTransitionError, QueueBoxError } from './errors.ts';

/**
 * The state of an outbox or inbox row, in memory.
 *
 * `Sent` stands for the outbox literal `sent` and the inbox literal `processed`. `Failed` is never written to the
 * database: a repository returns it for a literal it does not know, and such a row is never claimed.
 */
export const MessageState = {
  Pending: 'Pending',
  Processing: 'Processing',
  Sent: 'Sent',
  Dead: 'Dead',
  Failed: 'Failed',
} as const;
export type MessageState = (typeof MessageState)[keyof typeof MessageState];

/** The two tables QueueBox works on. */
export type Table = 'outbox' | 'inbox';

/** A state that may be written to the database (every state but `Failed`). */
export type StoredState = Exclude<MessageState, 'Failed'>;

/** The literals of the `state` column, exactly as the specification lists them. */
export const STATE_LITERALS: Readonly<Record<Table, Readonly<Record<StoredState, string>>>> = {
  outbox: { Pending: 'pending', Processing: 'processing', Sent: 'sent', Dead: 'dead' },
  inbox: { Pending: 'pending', Processing: 'processing', Sent: 'processed', Dead: 'dead' },
};

/** Width of the `state` column on both databases (VARCHAR(50) / NVARCHAR(50)). */
export const STATE_COLUMN_WIDTH = 50;

/** The literal written to `table.state` for `state`. Throws for `Failed`, which is never written. */
export function stateLiteral(table: Table, state: MessageState): string {
  if (state === MessageState.Failed) {
    throw new QueueBoxError(`The Failed state is never written to the ${table} table`, {
      context: { table, state },
    });
  }
  return STATE_LITERALS[table][state];
}

/** The state a stored literal stands for; `Failed` for a literal this version does not know. */
export function stateFromLiteral(table: Table, literal: string): MessageState {
  const literals = STATE_LITERALS[table];
  for (const state of Object.keys(literals) as StoredState[]) {
    if (literals[state] === literal) return state;
  }
  return MessageState.Failed;
}

/** Where a row comes from before it has a state: the application's insert (outbox) or a source's store (inbox). */
export const ORIGIN = 'new' as const;
export type Origin = typeof ORIGIN;

/** One row of a state table of the specification. */
export interface Transition {
  readonly from: StoredState | Origin;
  readonly to: StoredState;
  readonly when: string;
}

/** The outbox state table of the specification, row by row. `sent` and `dead` are final. */
export const OUTBOX_TRANSITIONS: readonly Transition[] = [
  { from: ORIGIN, to: 'Pending', when: 'Your application inserts the row.' },
  { from: 'Pending', to: 'Processing', when: 'The poller claims the row.' },
  { from: 'Processing', to: 'Sent', when: 'The destination accepts the message.' },
  {
    from: 'Processing',
    to: 'Pending',
    when: 'A retry is scheduled, or the lease expired and the reclaim step returned the row.',
  },
  {
    from: 'Processing',
    to: 'Dead',
    when: 'No attempt remains, no route matches, or a transform dead-letters the message.',
  },
];

/** The inbox state table of the specification, row by row. `processed` and `dead` are final. */
export const INBOX_TRANSITIONS: readonly Transition[] = [
  { from: ORIGIN, to: 'Pending', when: 'A source accepts the message.' },
  {
    from: ORIGIN,
    to: 'Dead',
    when: 'An AMQP source stores a message that its transform rejected, or a broker message whose body is not JSON.',
  },
  { from: 'Pending', to: 'Processing', when: 'The relay or a pull worker claims the row.' },
  { from: 'Processing', to: 'Sent', when: 'The relay forwarded the row, or a pull worker completed it.' },
  {
    from: 'Processing',
    to: 'Pending',
    when: 'A pull worker schedules a retry, or the relay lease expired and the reclaim step returned the row.',
  },
  {
    from: 'Processing',
    to: 'Processing',
    when: 'A pull claim takes over a row whose lease expired, with a new claim token.',
  },
  { from: 'Processing', to: 'Dead', when: 'The topic template rendered empty, or a pull worker gave up.' },
];

/** The transition table of `table`. */
export function transitionsOf(table: Table): readonly Transition[] {
  return table === 'outbox' ? OUTBOX_TRANSITIONS : INBOX_TRANSITIONS;
}

/** Whether the specification allows `table` rows to move `from` → `to`. */
export function canTransition(table: Table, from: MessageState | Origin, to: MessageState): boolean {
  return transitionsOf(table).some((t) => t.from === from && t.to === to);
}

/** Refuses any transition that is not a row of the table's state table. */
export function assertTransition(table: Table, from: MessageState | Origin, to: MessageState): void {
  if (!canTransition(table, from, to)) throw new InvalidTransitionError(table, from, to);
}

/** States that no automatic transition leaves (only an operator moves a row out of them). */
export function isFinal(table: Table, state: MessageState): boolean {
  if (state === MessageState.Failed) return false;
  return !transitionsOf(table).some((t) => t.from === state);
}
