/**
 * The channel names in TypeScript are the ones migration 0002's triggers notify: the triggers pass the channel
 * as their argument, so a rename on one side only would silence every wake-up (the drains would fall back to
 * polling, which no functional test notices).
 */
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../src/migrations.generated.ts';
import { INBOX_CHANNEL, OUTBOX_CHANNEL } from '../src/wake-up-channels.ts';

describe('the wake-up channels', () => {
  it("are the channels migration 0002's insert triggers notify", () => {
    // Prepare
    const sql = MIGRATIONS.find((migration) => migration.version === 2)?.sql ?? '';
    const triggerChannel = (table: string) =>
      new RegExp(
        `AFTER INSERT ON ${table}\\s+FOR EACH STATEMENT EXECUTE FUNCTION queuebox_notify_insert\\('([^']+)'\\)`,
      ).exec(sql)?.[1];

    // Assess
    expect({ outbox: triggerChannel('outbox'), inbox: triggerChannel('inbox') }).toEqual({
      outbox: OUTBOX_CHANNEL,
      inbox: INBOX_CHANNEL,
    });
  });
});
