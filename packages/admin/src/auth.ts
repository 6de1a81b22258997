import { createHash, timingSafeEqual } from 'node:crypto';

/** A header value in any of the shapes node:http and API Gateway hand over. */
export type HeaderValue = string | readonly string[] | undefined;

/** The value of header `name` in any letter case (the first, when repeated). */
export function headerOf(headers: Readonly<Record<string, HeaderValue>>, name: string): string | undefined {
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== wanted || value === undefined) continue;
    return typeof value === 'string' ? value : value[0];
  }
  return undefined;
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/**
 * Whether an `Authorization` header carries `Bearer <token>`. Both sides are hashed to equal-length digests and
 * compared with `timingSafeEqual`, so the time taken says nothing about the token, not even its length.
 */
export function bearerMatches(authorization: string | undefined, token: string): boolean {
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization ?? '');
  // Compare even without a candidate, so a missing header costs what a wrong one does.
  const candidate = match?.[1] ?? '';
  const equal = timingSafeEqual(digest(candidate), digest(token));
  return equal && match !== null;
}
