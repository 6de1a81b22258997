import type { QueueBoxConfig } from '@queuebox/config';
import { verifyStandardWebhooks } from '@queuebox/inbox';
import type { Logger } from './logger.ts';

/** Where the local runtime serves the demo receiver, when a destination points at it. */
export const DEMO_RECEIVER_PATH = '/_demo/receiver';

/** The demo receiver: logs each delivery it gets, so a newcomer can watch a webhook arrive. */
export interface DemoReceiver {
  /** Logs one delivery and answers the status to send (204, or 401 for a bad signature). */
  receive(body: Uint8Array, headers: Readonly<Record<string, string>>): number;
  /** The destinations that point at it. */
  readonly destinations: readonly string[];
}

/**
 * The demo receiver, or undefined when no `http` destination's URL has the path {@link DEMO_RECEIVER_PATH}: the
 * route exists only for configurations that use it (the shipped `queuebox.yaml` does). When those destinations
 * sign (Standard Webhooks), the receiver checks the signature with their secrets and refuses a bad one with 401,
 * as a real receiver would.
 */
export function createDemoReceiver(
  destinations: QueueBoxConfig['destinations'],
  logger: Logger,
  now: () => number = Date.now,
): DemoReceiver | undefined {
  const names: string[] = [];
  const secrets: string[] = [];
  let unsigned = false;
  for (const [name, destination] of Object.entries(destinations)) {
    if (destination.type !== 'http') continue;
    let path: string;
    try {
      path = new URL(destination.url).pathname;
    } catch {
      continue;
    }
    if (path !== DEMO_RECEIVER_PATH) continue;
    names.push(name);
    if (destination.signing) secrets.push(...destination.signing.secrets);
    else unsigned = true;
  }
  if (names.length === 0) return undefined;
  const log = logger.child({ component: 'demo-receiver' });

  return {
    destinations: names,
    receive(body, headers) {
      let signature: 'valid' | 'invalid' | 'unsigned' = 'unsigned';
      if (secrets.length > 0 && headers['webhook-signature'] !== undefined) {
        const verdict = verifyStandardWebhooks(
          body,
          headers,
          { scheme: 'standard-webhooks', secrets, toleranceSec: 300 },
          now(),
        );
        signature = verdict.ok ? 'valid' : 'invalid';
      }
      // A destination that signs must not get an unsigned delivery accepted; one that does not sign may.
      const refused = signature === 'invalid' || (signature === 'unsigned' && !unsigned);
      const text = Buffer.from(body).toString('utf8');
      let payload: unknown = text;
      try {
        payload = JSON.parse(text);
      } catch {
        // Not JSON: logged as text.
      }
      log.info(refused ? 'demo receiver refused a delivery' : 'demo receiver got a delivery', {
        outboxId: headers['idempotency-key'],
        inboxId: headers['x-inbox-id'],
        source: headers['x-source'],
        idempotencyKey: headers['x-idempotency-key'],
        correlationId: headers['x-correlation-id'],
        signature,
        payload,
      });
      return refused ? 401 : 204;
    },
  };
}
