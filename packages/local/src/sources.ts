import type { QueueBoxConfig } from '@queuebox/config';

// Moved to @queuebox/services, which both shells share; re-exported so @queuebox/local keeps its API.
export { inboxSources } from '@queuebox/services';

/** Names of the sources the local runtime does not consume yet (broker sources: amqp, kafka, nats). */
export function unconsumedSources(sources: QueueBoxConfig['sources']): string[] {
  return Object.entries(sources)
    .filter(([, source]) => source.type !== 'http')
    .map(([name]) => name);
}
