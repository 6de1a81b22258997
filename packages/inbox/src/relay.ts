import type {
  Clock,
  ConfigIssue,
  DrainReport,
  ForwardAndClaimReport,
  ForwardItem,
  ForwardMessage,
  Headers,
  InboxDeadItem,
  InboxStore,
  ReclaimReport,
  RelayClaimedRows,
  RelayClaimOptions,
  RelayInboxRow,
  RowId,
  SettleReport,
} from '@queuebox/core';
import {
  CONFIG_DEFAULTS,
  ConfigError,
  defaultSourceTopicTemplate,
  intervalPassed,
  MessageState,
  renderTemplate,
  retryWhileUnavailable,
  SOURCE_TEMPLATE_PLACEHOLDERS,
  StoreUnavailableError,
  sleepUnlessAborted,
  systemClock,
  templateProblems,
  templateUses,
} from '@queuebox/core';
import type { InboxOptions, OutboxOptions, SourceOptions, Sources } from './options.ts';
import { sourceMode } from './options.ts';

/** The topic template of a source: its `topic`, else `{{ eventType }}` for HTTP and `{{ source }}` for brokers. */
export function topicTemplateOf(source: SourceOptions): string {
  return source.topic ?? defaultSourceTopicTemplate(source.type);
}

/**
 * Longest topic, in characters: the width of the outbox topic column. A longer topic could never be inserted and
 * would fail the whole forwarded batch, so such a row goes dead like an empty topic.
 */
export const MAX_TOPIC_LENGTH = 400;

/** The relay headers, as the outbox row carries them. They replace received headers of the same name in any case. */
export const RELAY_HEADERS = {
  inboxId: 'x-inbox-id',
  source: 'x-source',
  idempotencyKey: 'x-idempotency-key',
  correlationId: 'X-Correlation-Id',
} as const;

const RELAY_HEADER_NAMES: ReadonlySet<string> = new Set(
  Object.values(RELAY_HEADERS).map((h) => h.toLowerCase()),
);

/**
 * Whether a received header name is a relay header in some letter case. Unicode's case mappings count, not only
 * ASCII's: a broker message's header names are any text, and `x-ſource` (long s), `x-ınbox-id` (dotless i),
 * `X-İNBOX-ID` (dotted capital I) or `x-idempotency-\u212Aey` (Kelvin sign) upper- or lower-case to a relay header,
 * so a consumer that compares names without regard to case would take them for it.
 */
export function isRelayHeaderName(name: string): boolean {
  const lower = name.toLowerCase();
  return (
    RELAY_HEADER_NAMES.has(lower) ||
    RELAY_HEADER_NAMES.has(name.toUpperCase().toLowerCase()) ||
    // `İ` (U+0130) lower-cases to `i` and a combining dot; Java's equalsIgnoreCase takes it for `i`.
    RELAY_HEADER_NAMES.has(lower.replaceAll('i\u0307', 'i'))
  );
}

/** Why a row whose topic template rendered empty goes dead. */
export const EMPTY_TOPIC = 'the topic template rendered empty';

/**
 * The outbox topic of a message of `sourceName` with `eventType`: the source's template rendered, or why no
 * destination could ever take it (empty, or longer than MAX_TOPIC_LENGTH). The relay sends such a row dead; the
 * HTTP ingestion refuses a too-long topic with 400 before storing, so it never answers 202 for it.
 */
export function renderSourceTopic(
  sourceName: string,
  source: SourceOptions,
  eventType: string | null,
): { readonly ok: true; readonly topic: string } | { readonly ok: false; readonly reason: string } {
  const topic = renderTemplate(topicTemplateOf(source), { source: sourceName, eventType });
  if (topic.trim() === '') return { ok: false, reason: EMPTY_TOPIC };
  if (topic.length > MAX_TOPIC_LENGTH) {
    return {
      ok: false,
      reason: `the rendered topic is longer than ${MAX_TOPIC_LENGTH} characters`,
    };
  }
  return { ok: true, topic };
}

/** Options of the mapping: `inbox.relay.maxAttempts`, else `outbox.maxAttempts`, else 10. */
export interface RelayMappingOptions {
  readonly inbox?: InboxOptions;
  readonly outbox?: OutboxOptions;
}

/** The outbox row for an inbox row, or why the row must go dead instead. */
export type RelayMapping =
  | { readonly ok: true; readonly message: ForwardMessage }
  | { readonly ok: false; readonly reason: string };

/**
 * Maps an inbox row to the outbox row the relay writes, exactly as the seed's relay table says:
 * topic = the rendered `sources.<name>.topic` template; key = aggregate_id; payload as stored (the row's payload
 * when it carries one; a row claimed by `claimForRelay` carries none, and the message then has none either, so the
 * store's `forward` copies the stored payload in the database); headers = the stored
 * headers, then `x-inbox-id`, `x-source`, `x-idempotency-key`, and `X-Correlation-Id` when the row carries one,
 * each replacing a received header of that name in any letter case, Unicode's included ({@link isRelayHeaderName};
 * a received `X-Correlation-Id` is dropped
 * even when the row has no correlation id, so a sender can never set a relay header); max_attempts =
 * `inbox.relay.maxAttempts`, else `outbox.maxAttempts`, else 10. A topic that renders empty (or only white space)
 * gives `ok: false`: the row goes dead, since it can reach no destination; so does a topic longer than
 * MAX_TOPIC_LENGTH.
 */
export function toOutboxMessage(
  row: RelayInboxRow,
  source: SourceOptions,
  options: RelayMappingOptions,
): RelayMapping {
  const rendered = renderSourceTopic(row.source, source, row.eventType);
  if (!rendered.ok) return rendered;
  const { topic } = rendered;
  const headers: Headers = {};
  for (const [name, value] of Object.entries(row.headers)) {
    if (!isRelayHeaderName(name)) headers[name] = value;
  }
  headers[RELAY_HEADERS.inboxId] = row.id;
  headers[RELAY_HEADERS.source] = row.source;
  headers[RELAY_HEADERS.idempotencyKey] = row.idempotencyKey;
  if (row.correlationId !== null && row.correlationId !== '') {
    headers[RELAY_HEADERS.correlationId] = row.correlationId;
  }
  return {
    ok: true,
    message: {
      topic,
      key: row.aggregateId,
      ...(row.payload === undefined ? {} : { payload: row.payload }),
      headers,
      maxAttempts:
        options.inbox?.relay?.maxAttempts ??
        options.outbox?.maxAttempts ??
        CONFIG_DEFAULTS.outbox.maxAttempts,
    },
  };
}

/** Dependencies of the relay. */
export interface RelayDeps {
  readonly store: InboxStore;
  readonly sources: Sources;
  /** `inbox.relay`: enabled (default true), batchSize (default 100), claimTimeoutMs (default 300000), maxAttempts. */
  readonly inbox?: InboxOptions;
  /** `outbox.maxAttempts`: the default max_attempts of the forwarded rows. */
  readonly outbox?: OutboxOptions;
  /** Default the system clock (deadlines only; claims and leases use the database clock). */
  readonly clock?: Clock;
  /**
   * Least time between two reclaim steps of this relay: a drain starts with one only when this much has passed
   * since the last. Under load the relay is woken by every stored webhook, and a reclaim before each claim would
   * be one more statement per drain that almost never finds anything (a relay lease lasts `claimTimeoutMs`,
   * five minutes by default). Default 1000 ms; 0 reclaims at the start of every drain. The first drain always
   * reclaims.
   */
  readonly reclaimIntervalMs?: number;
  /**
   * How long a drain goes on after a claim that did not fill a batch. Each batch is forwarded together with the
   * claim of the next (`store.forwardAndClaim`), so under a steady stream of webhooks the relay spends one round
   * trip per batch where a forward and a claim took two; but the drain's caller wakes the outbox only when the
   * drain returns (relay-tick on AWS; locally the outbox also hears the insert's notification). So after this many
   * milliseconds a partial batch is forwarded alone and the drain ends, as it always did after a partial batch.
   * Full batches go on until none is left or the deadline, as before. Default 200 ms; 0 forwards the first partial
   * batch alone and ends, as the relay did before `forwardAndClaim`.
   */
  readonly chainMs?: number;
  /**
   * Under load, a pause between two claims of a drain: after a claim that returned at least `fillMinRows` rows but
   * not a full batch, the relay waits `fillMs` (from the claim's answer) before it forwards the batch with the
   * claim of the next, so the next batch holds the rows of a round trip and `fillMs` instead of one round trip.
   * Each claim, forward and outbox claim costs a statement, planning and a commit in PostgreSQL, and rows that
   * arrive together are delivered together; at 2,000 webhooks/s claims of 20–30 rows cost about a quarter more
   * CPU per row, in the runtime and in PostgreSQL, than claims of 40–60. A claim of fewer rows (a trickle, e.g.
   * 200/s) is forwarded at once, so a lone webhook is never held back; the wait ends at the chain window and the
   * deadline. Default 20 ms; 0 never waits.
   */
  readonly fillMs?: number;
  /** Least rows in a claim that make the relay wait `fillMs` (see there). Default 10. */
  readonly fillMinRows?: number;
  /**
   * The first pause before the relay claims again after a claim that took nothing but left rows blocked (the
   * store's `blocked`: rows of an aggregate id held back by an earlier row of their id that another relay holds,
   * see `InboxStore.claimForRelay`). Each pause doubles, up to `blockedPauseMaxMs`, until a claim takes rows or
   * leaves none blocked, or the deadline: the drain does not end as idle while rows wait for another relay's forward,
   * because that relay's own claim may not see them (its snapshot can predate them) and would end empty, leaving
   * them to the next tick. A crashed holder keeps this relay's drain waiting: it claims again at most once per
   * `blockedPauseMaxMs` until the holder's lease runs out (`claimTimeoutMs`) and its reclaim step, which runs while it
   * waits too (at most once per `reclaimIntervalMs`), returns the row, then claims it in order; or until its deadline
   * or its signal (the local runtime's shutdown). Default 20 ms; 0 ends the drain at once, as before.
   *
   * Meanwhile the other aggregate ids go on: each claim skips the ids the previous claim's answer says are held
   * back (`blockedBy`, passed as `skipAggregatesOf`), so the later rows of ids a crashed relay holds, which are the
   * oldest pending rows and would fill the claim's whole window, do not hide the others'. Such a claim reads the
   * skipped ids' due rows to get past them, so while held ids remain it is paced: after one that took less than a
   * batch, the rows are forwarded alone and the next claim waits the same growing pause (a full batch goes on at
   * once). A held id is probed by every claim that skips it, and read again by the next claim once it is free.
   *
   * The bound: a claim skips at most `MAX_SKIPPED_AGGREGATES` (1000) ids. A crashed relay holds as many ids as rows
   * in its batch (`inbox.relay.batchSize` goes up to 1000), so one crashed relay's ids are always skipped; several
   * can crash together, and when the later rows of the held ids a claim cannot skip fill its whole window
   * (`batchSize` rows), it takes nothing, its `blockedBy` names the same 1000 ids again, and the other ids' rows wait
   * for the held ids' lease (`claimTimeoutMs`, 5 minutes by default) as they did before ids were skipped; the reclaim
   * step then returns the held rows and the drain forwards everything in order
   * (test/faults/concurrency-relay-held-ids.integration.test.ts: 150 held ids forwarded past, 1100 waited for).
   */
  readonly blockedPauseMs?: number;
  /** The longest pause of `blockedPauseMs`. Default 1000 ms. */
  readonly blockedPauseMaxMs?: number;
  /**
   * How the relay waits `fillMs`, `blockedPauseMs` and between the tries of a write the database could not take.
   * Default a timer. A drain's signal ends any of these waits at once, whichever sleep waits.
   */
  readonly sleep?: (ms: number) => Promise<void>;
}

/** What one drain of the relay did: core's DrainReport and the relay's own settles. */
export interface RelayDrainReport extends DrainReport {
  /** False when `inbox.relay.enabled` is false: the drain did nothing. */
  readonly enabled: boolean;
  /**
   * Rows forwarded into the outbox; wake the outbox when it is not 0. This counts the rows of a forward that
   * committed although its call failed (its answer was lost), which the try again found already forwarded.
   */
  readonly forwarded: number;
  /**
   * Ids of the outbox rows written, for the log. Fewer than `forwarded` when a forward's answer was lost: the try
   * again learns that its rows were forwarded, not the ids of their outbox rows.
   */
  readonly outboxIds: readonly RowId[];
  /**
   * `empty` when no claimable row was left (or the relay is off), `time` when the deadline stopped it, `aborted`
   * when its signal did.
   */
  readonly stoppedFor: 'empty' | 'time' | 'aborted';
  /**
   * The longest wait of one of the drain's forwards for outbox key locks that other transactions held, in
   * milliseconds (the store's `keyWaitMs`): an application transaction that enqueued a row of the same key and had
   * not committed held the forward, and every later forward of the relay waited behind it. Absent when no forward
   * waited (or the store does not measure it: SQL Server's does not). The local runtime and relay-tick log
   * {@link KEY_WAIT_WARNING} from {@link KEY_WAIT_WARNING.thresholdMs}.
   */
  readonly keyWaitMs?: number;
}

/**
 * The warning the callers of a drain log when its `keyWaitMs` reaches `thresholdMs`: the message and a hint for
 * the operator, who otherwise sees only an advisory-lock wait in pg_stat_activity.
 */
export const KEY_WAIT_WARNING = {
  thresholdMs: 1000,
  message: 'relay forward waited for outbox key locks held by other transactions',
  hint:
    'an application transaction that enqueued an outbox row of the same key and has not committed holds it; ' +
    "see pg_stat_activity (wait_event_type Lock, wait_event advisory; the holder is often 'idle in transaction'); " +
    'idle_in_transaction_session_timeout bounds how long',
} as const;

/** How long a drain may run. */
export interface RelayDrainBudget {
  /** No claim starts at or after this time (the clock's milliseconds); the batch in hand is then forwarded. */
  readonly deadline: number;
  /**
   * Stops the drain before its deadline (the local runtime's shutdown): no new claim starts, a wait (`fillMs`,
   * `blockedPauseMs`, a pause before a try again) ends at once, and the batch in hand is forwarded once, not tried
   * again; a store call in flight finishes. Rows it cannot forward are left to their lease, as at a crash.
   */
  readonly signal?: AbortSignal;
}

/** The relay: forwards pending rows of push sources into the outbox. */
export interface Relay {
  /**
   * Reclaims expired relay claims, then claims and forwards batches until none is left, `deadline` passes or
   * `signal` aborts.
   */
  drain(budget: RelayDrainBudget): Promise<RelayDrainReport>;
  /** The push sources the relay works for. */
  readonly sources: readonly string[];
}

/** `wait`, or less once `signal` aborts (at once when it already has). Never rejects; leaves no listener behind. */
function untilAborted(wait: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  if (signal === undefined) return wait;
  if (signal.aborted) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const finish = () => {
      signal.removeEventListener('abort', finish);
      resolve();
    };
    signal.addEventListener('abort', finish, { once: true });
    wait.then(finish, finish);
  });
}

/**
 * Creates the relay. Only push sources are relayed (pull sources never); each batch is claimed without its
 * payloads and forwarded in the store call that claims the next batch (`store.forwardAndClaim`: outbox insert,
 * whose payload the database copies from the inbox row, and inbox → processed in one transaction; then the next
 * claim), and rows whose topic renders empty go dead with one `store.markDead` call; both writes are tried again
 * while the database is unavailable, within the drain's deadline and signal. The store's relay claim keeps the
 * order of each aggregate id across relays; a drain whose claim took nothing but left rows blocked behind another
 * relay's claims again (`blockedPauseMs`) until its deadline or its signal. Throws ConfigError for an unusable
 * topic template, including an AMQP template with `{{ eventType }}` when the source sets neither `eventTypePath`
 * nor `eventTypeFromHeader`.
 */
export function createRelay(deps: RelayDeps): Relay {
  const issues: ConfigIssue[] = [];
  const push = new Map<string, SourceOptions>();
  for (const [name, source] of Object.entries(deps.sources)) {
    if (sourceMode(source) !== 'push') continue;
    const template = topicTemplateOf(source);
    for (const message of templateProblems(template, SOURCE_TEMPLATE_PLACEHOLDERS)) {
      issues.push({ path: `sources.${name}.topic`, message });
    }
    // The seed: an AMQP message carries no event type of its own, so the template could only ever render it empty.
    if (
      source.type === 'amqp' &&
      templateUses(template, 'eventType') &&
      source.eventTypePath === undefined &&
      !source.eventTypeFromHeader
    ) {
      issues.push({
        path: `sources.${name}.topic`,
        message:
          'uses {{ eventType }}, but the AMQP source sets neither eventTypePath nor eventTypeFromHeader: true',
      });
    }
    push.set(name, source);
  }
  if (issues.length > 0) throw new ConfigError(issues);
  const clock = deps.clock ?? systemClock;
  const relay = deps.inbox?.relay;
  const enabled = relay?.enabled ?? true;
  const batchSize = relay?.batchSize ?? CONFIG_DEFAULTS.inbox.relay.batchSize;
  const leaseMs = relay?.claimTimeoutMs ?? CONFIG_DEFAULTS.inbox.relay.claimTimeoutMs;
  const names = [...push.keys()];
  const reclaimIntervalMs = Math.max(0, deps.reclaimIntervalMs ?? 1000);
  const chainMs = Math.max(0, deps.chainMs ?? 200);
  const fillMs = Math.max(0, deps.fillMs ?? 20);
  const fillMinRows = Math.max(1, deps.fillMinRows ?? 10);
  const blockedPauseMs = Math.max(0, deps.blockedPauseMs ?? 20);
  const blockedPauseMaxMs = Math.max(blockedPauseMs, deps.blockedPauseMaxMs ?? 1000);
  let lastReclaimAt = Number.NEGATIVE_INFINITY;
  // The rows that held back the last claim's blocked rows (its `blockedBy`, one per aggregate id): the next claim
  // skips their aggregate ids (see `blockedPauseMs`). Kept from one drain to the next: a drain that started from
  // nothing would find the held ids again one claim at a time, each claim's window holding the next id's rows.
  let skip: readonly RowId[] = [];
  const mapping: RelayMappingOptions = { inbox: deps.inbox, outbox: deps.outbox };

  async function drain({ deadline, signal }: RelayDrainBudget): Promise<RelayDrainReport> {
    const report = {
      enabled,
      reclaimed: { returned: 0, dead: 0 } as ReclaimReport,
      claimed: 0,
      forwarded: 0,
      dead: 0,
      stale: 0,
      batches: 0,
      outboxIds: [] as RowId[],
      stoppedFor: 'empty' as RelayDrainReport['stoppedFor'],
    };
    if (!enabled || names.length === 0) return report;
    const stopped = () => signal?.aborted === true;
    if (stopped()) {
      report.stoppedFor = 'aborted';
      return report;
    }
    /** Waits `ms`, or less once the signal aborts: a stop never waits out a pause (up to 2 s each). */
    const pause = (ms: number): Promise<void> => {
      if (deps.sleep === undefined) return sleepUnlessAborted(ms, signal);
      if (stopped()) return Promise.resolve();
      return untilAborted(deps.sleep(ms), signal);
    };
    const started = clock.now();
    /**
     * The reclaim step, at most once per `reclaimIntervalMs`: at the start of the drain, and again while the drain
     * waits for rows blocked behind another relay's (see `blockedPauseMs`). Only at the start, a runtime restarted
     * after a crash began its first drain before its own earlier claims' leases ran out, and that drain then waited
     * for their ids until its deadline, the rows reclaimed by the next one (an outside crash soak: a keyed webhook
     * forwarded 38 s after it was claimed, with an 8 s lease; 35 s of that was the drain's budget).
     */
    const reclaimIfDue = async () => {
      const now = clock.now();
      if (!intervalPassed(now, lastReclaimAt, reclaimIntervalMs)) return;
      const reclaimed = await deps.store.reclaimExpired(names);
      lastReclaimAt = now;
      report.reclaimed = {
        returned: report.reclaimed.returned + reclaimed.returned,
        dead: report.reclaimed.dead + reclaimed.dead,
      };
    };
    await reclaimIfDue();
    // Each batch is forwarded together with the claim of the next one (`forwardAndClaim`: one statement on
    // PostgreSQL), so a steady stream costs one round trip per batch. The drain ends when a claim finds nothing,
    // at the deadline or the signal, or at a partial batch once `chainMs` have passed — but not while the last
    // claim left rows blocked behind another relay's (`blockedPauseMs`).
    const claim = { sources: names, batchSize, leaseMs };
    const nextClaim = (): RelayClaimOptions =>
      skip.length === 0 ? claim : { ...claim, skipAggregatesOf: skip };
    const chainUntil = started + chainMs;
    // The attempt of each row in hand when this drain claimed it, until its forward or markDead answered: see
    // `settledAfterAll`.
    const attempts = new Map<RowId, number>();
    const settledRows = (settled: SettleReport) => {
      for (const row of settled.settled) attempts.delete(row.id);
      for (const id of settled.stale) attempts.delete(id);
    };
    // The longest wait of a forward for outbox key locks other transactions held (`keyWaitMs`).
    let keyWaitMs = 0;
    const account = (forwarded: ForwardAndClaimReport['forwarded']) => {
      keyWaitMs = Math.max(keyWaitMs, forwarded.keyWaitMs ?? 0);
      settledRows(forwarded);
      report.forwarded += forwarded.settled.length;
      report.stale += forwarded.stale.length;
      report.outboxIds.push(...forwarded.outboxIds);
    };
    /**
     * A write's report after a failed try and a try again, with the rows that the failed try settled after all
     * moved from `stale` to `settled`. A try can commit and still fail: SQL Server's forward-and-claim claims in a
     * statement of its own after its forward committed, PostgreSQL's reads the claimed rows after its statement
     * committed, and a connection can drop before the answer of a commit. The try again then finds those rows no
     * longer processing and reports them stale; counted stale, they would not count as forwarded, and the caller
     * would not wake the outbox for them (relay-tick wakes outbox-tick only for a drain that forwarded rows). Such a
     * row is in the state the write gives, at the attempt it had when this drain claimed it; a row whose lease
     * expired meanwhile counted one attempt more in the reclaim step, and stays stale. The rows are read one by one
     * (`store.get`), which only a failed try costs; a row that cannot be read stays stale. The reads keep to the
     * drain's budget like its claims: none starts at or after the deadline or once the signal aborted, and the rows
     * not read by then stay stale (uncounted as forwarded; relay-tick wakes outbox-tick for stale rows too, and the
     * local outbox polls).
     */
    const settledAfterAll = async <S extends 'Sent' | 'Dead', R extends SettleReport<S>>(
      written: R,
      state: S,
    ): Promise<R> => {
      if (written.stale.length === 0) return written;
      const settled = [...written.settled];
      const stale: RowId[] = [];
      for (const [n, id] of written.stale.entries()) {
        if (stopped() || clock.now() >= deadline) {
          stale.push(...written.stale.slice(n));
          break;
        }
        const row = await deps.store.get(id).catch(() => undefined);
        if (row !== undefined && row.state === MessageState[state] && row.attempt === attempts.get(id)) {
          settled.push({ id, state });
        } else stale.push(id);
      }
      return { ...written, settled, stale };
    };
    /**
     * A write the database could not take (`StoreUnavailableError`: a restart, a failover) is tried again, pausing
     * 0.1 s doubling to 2 s, while a try can start before the deadline and the signal has not aborted: the rows are
     * in hand, so a blip of the database no longer leaves them processing for their whole lease (5 minutes by
     * default) while the later rows of their aggregate ids wait. A failed forward-and-claim is tried again as a
     * forward alone (the rows a forward-and-claim also claimed, had it committed, then wait for their lease).
     */
    const tryAgain = <T>(write: () => Promise<T>, error: unknown) =>
      retryWhileUnavailable(write, {
        until: deadline,
        stopped,
        now: () => clock.now(),
        sleep: pause,
        failed: { error },
      });
    const forwardAgain = async (items: readonly ForwardItem[], error: unknown) =>
      settledAfterAll(await tryAgain(() => deps.store.forward(items), error), 'Sent');
    const forwardAlone = (items: readonly ForwardItem[]) =>
      deps.store.forward(items).catch((error: unknown) => forwardAgain(items, error));
    const markDead = (items: readonly InboxDeadItem[]) =>
      deps.store
        .markDead(items)
        .catch(async (error: unknown) =>
          settledAfterAll(await tryAgain(() => deps.store.markDead(items), error), 'Dead'),
        );
    let forwards: ForwardItem[] = [];
    let claimedAt = started;
    let blockedPause = blockedPauseMs;
    for (;;) {
      if (stopped() || clock.now() >= deadline) {
        // Out of time, or stopped: the batch in hand is forwarded, nothing more is claimed.
        const why = stopped() ? 'aborted' : 'time';
        if (forwards.length > 0) account(await forwardAlone(forwards));
        report.stoppedFor = why;
        break;
      }
      let rows: RelayClaimedRows;
      const skipped = skip.length > 0;
      if (forwards.length === 0) rows = await deps.store.claimForRelay(nextClaim());
      else {
        let step: ForwardAndClaimReport;
        try {
          step = await deps.store.forwardAndClaim(forwards, nextClaim());
        } catch (error) {
          // The forward alone again: while the database comes back, or once after any other error, since a
          // forward-and-claim can fail in its claim after its forward committed (SQL Server runs them as two
          // statements; a deadlock victim there): the try again then finds the rows forwarded and counts them,
          // instead of the drain failing with them uncounted and the outbox not woken. Then a claim of its own.
          account(
            await (error instanceof StoreUnavailableError
              ? forwardAgain(forwards, error)
              : settledAfterAll(await forwardAlone(forwards), 'Sent')),
          );
          forwards = [];
          continue;
        }
        account(step.forwarded);
        rows = step.claimed;
      }
      claimedAt = clock.now();
      forwards = [];
      const before = new Set(skip);
      skip = rows.blockedBy ?? [];
      // The claim found held ids the last one did not skip: the next claim, skipping them too, reaches further at
      // once, so finding the held ids ahead of the others' rows costs claims, not pauses.
      const discovered = skip.some((id) => !before.has(id));
      // Rows held back by an earlier row of their aggregate id that another relay holds: its forward may be the
      // last thing it does, without seeing them, so this drain goes on for them (see `blockedPauseMs`).
      const waiting = blockedPauseMs > 0 && ((rows.blocked ?? 0) > 0 || skip.length > 0);
      // The claim skipped ids that are no longer held: their rows are unread, so the next claim (which skips
      // nothing) comes at once, whatever this one took.
      const unread = skipped && skip.length === 0;
      if (rows.length === 0) {
        if (unread || discovered) continue;
        if (!waiting) break;
        const wait = Math.min(blockedPause, deadline - claimedAt);
        if (wait > 0) await pause(wait);
        blockedPause = Math.min(blockedPause * 2, blockedPauseMaxMs);
        if (!stopped()) await reclaimIfDue();
        continue;
      }
      // A claim that skipped ids still held read their due rows to get past them: paced (see `blockedPauseMs`).
      const paced = waiting && skipped && !discovered && rows.length < batchSize;
      if (!paced) blockedPause = blockedPauseMs;
      report.batches += 1;
      report.claimed += rows.length;
      const deads: InboxDeadItem[] = [];
      for (const row of rows) {
        const source = push.get(row.source);
        const claimToken = row.claimToken ?? '';
        attempts.set(row.id, row.attempt);
        const mapped: RelayMapping = source
          ? toOutboxMessage(row, source, mapping)
          : { ok: false, reason: `source ${row.source} is not a configured push source` };
        if (mapped.ok) forwards.push({ id: row.id, claimToken, outbox: mapped.message });
        else deads.push({ id: row.id, claimToken, reason: mapped.reason });
      }
      if (deads.length > 0) {
        let dead: SettleReport<'Dead'>;
        try {
          dead = await markDead(deads);
        } catch (error) {
          // The batch's other rows are mapped: forwarded before the drain fails, rather than left to their lease.
          if (forwards.length > 0) account(await forwardAlone(forwards));
          throw error;
        }
        settledRows(dead);
        report.dead += dead.settled.length;
        report.stale += dead.stale.length;
      }
      if (paced) {
        // Forwarded alone now, and the next claim, which skips the held ids again, waits.
        if (forwards.length > 0) account(await forwardAlone(forwards));
        forwards = [];
        const wait = Math.min(blockedPause, deadline - clock.now());
        if (wait > 0) await pause(wait);
        blockedPause = Math.min(blockedPause * 2, blockedPauseMaxMs);
        if (!stopped()) await reclaimIfDue();
        continue;
      }
      if (rows.length < batchSize && rows.length >= fillMinRows && fillMs > 0) {
        // Under load: let the next batch fill for `fillMs` (see there), within the chain window and the deadline.
        const wait = Math.min(claimedAt + fillMs, chainUntil, deadline) - clock.now();
        if (wait > 0) await pause(wait);
      }
      if (rows.length < batchSize && clock.now() >= chainUntil) {
        // A partial batch after the chain window: forwarded alone, and the drain ends (see `chainMs`), unless
        // rows were left blocked or unread: then the next claim comes without a batch in hand.
        if (forwards.length > 0) account(await forwardAlone(forwards));
        forwards = [];
        if (!waiting && !unread) break;
      }
    }
    return keyWaitMs > 0 ? { ...report, keyWaitMs } : report;
  }

  return { drain, sources: names };
}
