import { OUTBOX_CHANNEL as CLIENT_OUTBOX_CHANNEL } from '@queuebox/client';
import { describe, expect, it } from 'vitest';
import { dispatchNotification, INBOX_CHANNEL, OUTBOX_CHANNEL, wakeBoth, wakeTargetOf } from '../src/index.ts';
import { aWakeCounter } from './wake-counter.ts';

describe('channels', () => {
  it('uses the channel that notifyOutbox of @queuebox/client notifies', () => {
    expect(OUTBOX_CHANNEL).toBe(CLIENT_OUTBOX_CHANNEL);
  });

  it('maps each channel to the drain it wakes', () => {
    expect(wakeTargetOf(OUTBOX_CHANNEL)).toBe('outbox');
    expect(wakeTargetOf(INBOX_CHANNEL)).toBe('inbox');
    expect(wakeTargetOf('queuebox_other')).toBeUndefined();
  });
});

describe('dispatchNotification', () => {
  it('calls the callback of the channel when the payload names the schema', () => {
    const counter = aWakeCounter();

    const outbox = dispatchNotification(counter, 'queuebox', OUTBOX_CHANNEL, 'queuebox');
    const inbox = dispatchNotification(counter, 'queuebox', INBOX_CHANNEL, 'queuebox');

    expect([outbox, inbox]).toEqual([true, true]);
    expect({ outbox: counter.outbox, inbox: counter.inbox }).toEqual({ outbox: 1, inbox: 1 });
  });

  it('ignores other schemas (compared exactly), a missing payload and unknown channels', () => {
    const counter = aWakeCounter();

    const results = [
      dispatchNotification(counter, 'queuebox', OUTBOX_CHANNEL, 'QueueBox'),
      dispatchNotification(counter, 'queuebox', OUTBOX_CHANNEL, undefined),
      dispatchNotification(counter, 'queuebox', 'queuebox_other', 'queuebox'),
    ];

    expect(results).toEqual([false, false, false]);
    expect({ outbox: counter.outbox, inbox: counter.inbox }).toEqual({ outbox: 0, inbox: 0 });
  });

  it('survives a callback that throws', () => {
    const throwing = {
      onOutbox: () => {
        throw new Error('boom');
      },
    };

    expect(dispatchNotification(throwing, 's', OUTBOX_CHANNEL, 's')).toBe(true);
    expect(() => wakeBoth(throwing)).not.toThrow();
  });
});
