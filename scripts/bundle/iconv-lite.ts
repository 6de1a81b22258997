/**
 * Stands in for `iconv-lite` in the Lambda bundles (scripts/bundle/aliases.ts), for tedious only. tedious calls
 * `decode(bytes, codePage)` for CHAR, VARCHAR and TEXT values and `encode(text, codePage)` for parameters typed
 * Char, VarChar or Text, with the code page of a SQL Server collation (tedious `lib/collation.js`: CP437, CP850,
 * CP874, CP932, CP936, CP949, CP950, CP1250–CP1258, or `utf-8` / `utf8`). QueueBox itself never does either: its
 * tables hold NVARCHAR, INT, BIGINT, DATETIME2 and UNIQUEIDENTIFIER columns and it binds NVarChar, Int and BigInt
 * parameters only (migrations/sqlserver, packages/store-sqlserver).
 *
 * iconv-lite carries its own code page tables (≈ 480 KiB of the bundle, mostly the double-byte ones); Node has them
 * already, in ICU, behind `TextDecoder`. Decoding is exactly iconv-lite's for every byte sequence iconv-lite
 * decodes to a character, except a lone 0x80 in CP932 (U+FFFD here, U+0080 there). Bytes that are no character
 * may decode differently: here the C1 control or private-use character the WHATWG encodings give some of them,
 * and one U+FFFD for an invalid byte pair where iconv-lite writes U+FFFD and then reads the second byte alone.
 * test/functions/bundle-iconv-lite.integration.test.ts compares both, byte by byte. What this module refuses,
 * with {@link CodePageUnavailableError}: decoding CP437 and CP850 (Node has no decoder) and CP949 (Node's `euc-kr`
 * lacks the Unified Hangul Code extension and would corrupt Korean text without a sign), and encoding any
 * double-byte code page.
 */
import { TextDecoder } from 'node:util';
import { QueueBoxError } from '@queuebox/core';

/** A code page tedious asked for that QueueBox's functions cannot convert. */
export class CodePageUnavailableError extends QueueBoxError {}

/** Node's decoder (a WHATWG encoding label) of each code page, by the code page's lower-case name. */
const DECODER_LABELS: Readonly<Record<string, string>> = {
  cp874: 'windows-874',
  cp1250: 'windows-1250',
  cp1251: 'windows-1251',
  cp1252: 'windows-1252',
  cp1253: 'windows-1253',
  cp1254: 'windows-1254',
  cp1255: 'windows-1255',
  cp1256: 'windows-1256',
  cp1257: 'windows-1257',
  cp1258: 'windows-1258',
  cp932: 'shift_jis',
  cp936: 'gbk',
  cp950: 'big5',
  utf8: 'utf-8',
};

/** Why a code page of a SQL Server collation is refused. */
const REFUSED: Readonly<Record<string, string>> = {
  cp437: 'Node has no decoder for it',
  cp850: 'Node has no decoder for it',
  cp949: "Node's euc-kr decoder lacks CP949's Unified Hangul Code and would corrupt Korean text",
};

const HINT = 'QueueBox stores text in NVARCHAR columns; read other columns as NVARCHAR (CAST … AS NVARCHAR)';

/** `CP1252` → `cp1252`, `utf-8` → `utf8`. */
function normalise(codePage: string): string {
  return codePage.toLowerCase().replace(/[^a-z0-9]/g, '');
}

function refuse(codePage: string, what: 'decode' | 'encode', why: string): never {
  throw new CodePageUnavailableError(
    `Cannot ${what} ${what === 'decode' ? 'CHAR/VARCHAR/TEXT data in' : 'a Char/VarChar/Text parameter as'} code page ${codePage} in QueueBox's functions: ${why}. ${HINT}`,
    { context: { codePage } },
  );
}

const decoders = new Map<string, TextDecoder>();

function decoderOf(name: string, codePage: string): TextDecoder {
  let decoder = decoders.get(name);
  if (decoder) return decoder;
  const label = DECODER_LABELS[name];
  if (label === undefined)
    return refuse(codePage, 'decode', REFUSED[name] ?? 'it is not a code page of a SQL Server collation');
  try {
    decoder = new TextDecoder(label);
  } catch (error) {
    // A Node built without full ICU knows only UTF-8 and UTF-16.
    throw new CodePageUnavailableError(
      `Cannot decode code page ${codePage}: this Node has no ${label} decoder (built without full ICU?). ${HINT}`,
      { cause: error, context: { codePage } },
    );
  }
  decoders.set(name, decoder);
  return decoder;
}

// ICU's Shift_JIS (IBM-943) swaps three control characters against CP932: byte 0x1A decodes to U+001C, 0x1C to
// U+007F and 0x7F to U+001A. No double-byte character contains these bytes, so swapping back is exact.
const CP932_CONTROLS = new Map([
  [0x1c, '\u001a'],
  [0x7f, '\u001c'],
  [0x1a, '\u007f'],
]);

function fixCp932Controls(bytes: Uint8Array, text: string): string {
  if (!bytes.includes(0x1a) && !bytes.includes(0x1c) && !bytes.includes(0x7f)) return text;
  let fixed = '';
  for (const char of text) fixed += CP932_CONTROLS.get(char.charCodeAt(0)) ?? char;
  return fixed;
}

/**
 * The text of `bytes` in `codePage`, as `iconv.decode` gives it (a leading UTF-8 byte order mark is dropped, bytes
 * that are no character become U+FFFD). Throws {@link CodePageUnavailableError} for CP437, CP850, CP949 and names
 * that are no SQL Server code page.
 */
export function decode(bytes: Uint8Array, codePage: string): string {
  const name = normalise(codePage);
  const text = decoderOf(name, codePage).decode(bytes);
  return name === 'cp932' ? fixCp932Controls(bytes, text) : text;
}

const encoders = new Map<string, ReadonlyMap<number, number>>();

/** Byte of each UTF-16 code unit in a single-byte code page, from Node's decoder of bytes 0x80–0xFF. */
function singleByteEncoder(name: string, codePage: string): ReadonlyMap<number, number> {
  const known = encoders.get(name);
  if (known) return known;
  if (!/^cp(874|125\d)$/.test(name)) {
    return refuse(
      codePage,
      'encode',
      'only UTF-8 and the single-byte Windows code pages can be encoded here',
    );
  }
  const high = Uint8Array.from({ length: 128 }, (_, i) => 0x80 + i);
  const chars = decoderOf(name, codePage).decode(high);
  const map = new Map<number, number>();
  for (let i = 0; i < 128; i++) {
    const unit = chars.charCodeAt(i);
    if (unit !== 0xfffd) map.set(unit, 0x80 + i);
  }
  encoders.set(name, map);
  return map;
}

const QUESTION_MARK = 0x3f;

/**
 * `text` in `codePage`, as `iconv.encode` gives it: UTF-8, or one byte per UTF-16 code unit in CP874 and
 * CP1250–CP1258, `?` for a character the code page lacks (a C1 control that stands for an undefined byte goes back
 * to that byte here, to `?` in iconv-lite). Throws {@link CodePageUnavailableError} for double-byte
 * code pages, CP437 and CP850.
 */
export function encode(text: string, codePage: string): Buffer {
  const name = normalise(codePage);
  if (name === 'utf8') return Buffer.from(text, 'utf8');
  const encoder = singleByteEncoder(name, codePage);
  const bytes = Buffer.allocUnsafe(text.length);
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    bytes[i] = unit < 0x80 ? unit : (encoder.get(unit) ?? QUESTION_MARK);
  }
  return bytes;
}

// tedious reads both `require('iconv-lite').decode` and `require('iconv-lite').default.decode`.
export default { decode, encode };
