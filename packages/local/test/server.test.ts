import { describe, expect, it } from 'vitest';
import { bareRequestPath } from '../src/server.ts';

describe('bareRequestPath', () => {
  it('drops the query string, the fragment and trailing slashes, as the ingestion matches paths', () => {
    expect(bareRequestPath('/inbox/demo?x=1')).toBe('/inbox/demo');
    expect(bareRequestPath('/inbox/demo/')).toBe('/inbox/demo');
    expect(bareRequestPath('/inbox/demo#f')).toBe('/inbox/demo');
    expect(bareRequestPath('/')).toBe('/');
    expect(bareRequestPath('//')).toBe('/');
    expect(bareRequestPath(undefined)).toBe('/');
  });
});
