/**
 * The host of the stand-in URL that infra puts in place of a `secret://` URL it cannot read at deploy time
 * (`secretStandIn`). `.invalid` is reserved (RFC 2606): no real URL has it, so a plan can tell "unknown at deploy
 * time" from a URL it may read.
 */
export const STAND_IN_HOST = 'secret.invalid';

/** Whether `url` is infra's stand-in for a `secret://` URL. */
export function isStandIn(url: string): boolean {
  try {
    return new URL(url).hostname === STAND_IN_HOST;
  } catch {
    return false;
  }
}
