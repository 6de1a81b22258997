import type { QueueBoxConfig } from './schema.ts';

/**
 * Whether this configuration runs a relay: `inbox.relay.enabled` and at least one push source. Without one there is
 * no relay-tick on AWS (infra plans none), so nothing drains, nor samples, the inbox on a schedule of its own.
 */
export function relayRuns(config: Pick<QueueBoxConfig, 'inbox' | 'sources'>): boolean {
  return config.inbox.relay.enabled && Object.values(config.sources).some((s) => s.mode === 'push');
}
