import type { QueueBoxConfig } from '@queuebox/config';
import type { SourceOptions, Sources } from '@queuebox/inbox';

/**
 * The configured sources as the inbox package reads them. The configuration spells "no authentication" as
 * `auth: { scheme: none }`, the inbox package as an absent `auth`; everything else passes as it is.
 */
export function inboxSources(sources: QueueBoxConfig['sources']): Sources {
  const out: Record<string, SourceOptions> = {};
  for (const [name, source] of Object.entries(sources)) {
    if (source.type === 'http' && source.auth.scheme === 'none') {
      const { auth: _none, ...rest } = source;
      out[name] = rest;
    } else {
      out[name] = source as SourceOptions;
    }
  }
  return out;
}
