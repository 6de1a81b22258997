/**
 * scripts/bundle/iconv-lite.ts against the real iconv-lite (the copy tedious loads): byte by byte for every code
 * page of a SQL Server collation it claims, and what tedious calls of it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { TextDecoder } from 'node:util';
import { describe, expect, it } from 'vitest';
import ours, { CodePageUnavailableError, decode, encode } from '../../scripts/bundle/iconv-lite.ts';
import { REPO_ROOT } from '../local/support.ts';

interface IconvLite {
  decode(bytes: Buffer, encoding: string): string;
  encode(text: string, encoding: string): Buffer;
}

const TEDIOUS = join(REPO_ROOT, 'node_modules', 'tedious');
const iconv = createRequire(join(TEDIOUS, 'package.json'))('iconv-lite') as IconvLite;

const SINGLE_BYTE = [
  'CP874',
  'CP1250',
  'CP1251',
  'CP1252',
  'CP1253',
  'CP1254',
  'CP1255',
  'CP1256',
  'CP1257',
  'CP1258',
];

/** Lead and trail bytes of each double-byte code page (wider than the valid ranges, so invalid pairs occur too). */
const DOUBLE_BYTE: Record<string, { leads: [number, number][]; trails: [number, number][] }> = {
  CP932: {
    leads: [
      [0x81, 0x9f],
      [0xe0, 0xfc],
    ],
    trails: [
      [0x40, 0x7e],
      [0x80, 0xfc],
    ],
  },
  CP936: {
    leads: [[0x81, 0xfe]],
    trails: [
      [0x40, 0x7e],
      [0x80, 0xfe],
    ],
  },
  CP950: {
    leads: [[0x81, 0xfe]],
    trails: [
      [0x40, 0x7e],
      [0xa1, 0xfe],
    ],
  },
};

/** Where we knowingly differ from iconv-lite on a byte sequence it decodes to a character. */
const KNOWN_DIFFERENCES: Record<string, string[]> = { CP932: ['80'] };

/** Text in each code page's script, iconv-lite encodes it and we decode it. */
const SAMPLES: Record<string, string> = {
  CP874: 'ภาษาไทย ๑๒๓',
  CP1250: 'Zażółć gęślą jaźń — Příliš žluťoučký kůň',
  CP1251: 'Съешь же ещё этих мягких французских булок €',
  CP1252: 'Café déjà vu, naïve façade “quoted” … €',
  CP1253: 'Ξεσκεπάζω την ψυχοφθόρα βδελυγμία',
  CP1254: 'Pijamalı hasta yağız şoföre çabucak güvendi',
  CP1255: 'דג סקרן שט בים מאוכזב',
  CP1256: 'نص حكيم له سر قاطع',
  CP1257: 'Įlinkdama fechtuotojo špaga sublykčiojusi',
  // CP1258 writes Vietnamese tones as combining marks.
  CP1258: 'Tiê\u0301ng Viê\u0323t co\u0301 dâ\u0301u, Đươ\u0300ng phô\u0301',
  CP932: 'いろはにほへと ちりぬるを 日本語テキスト ｶﾀｶﾅ ①',
  CP936: '简体中文的示例文本，包含标点。',
  CP950: '繁體中文的範例文字，包含標點。',
};

function hex(bytes: readonly number[]): string {
  return bytes.map((b) => b.toString(16).padStart(2, '0')).join('');
}

function* byteRanges(ranges: [number, number][]): Generator<number> {
  for (const [from, to] of ranges) for (let b = from; b <= to; b++) yield b;
}

/** Every input iconv-lite decodes to text without U+FFFD on which we disagree, as `hex: theirs / ours`. */
function disagreements(
  codePage: string,
  inputs: Iterable<number[]>,
): { compared: number; differing: string[] } {
  let compared = 0;
  const differing: string[] = [];
  for (const input of inputs) {
    const bytes = Buffer.from(input);
    const theirs = iconv.decode(bytes, codePage);
    if (theirs.includes('\ufffd')) continue;
    compared++;
    const mine = decode(bytes, codePage);
    if (mine !== theirs && !KNOWN_DIFFERENCES[codePage]?.includes(hex(input)))
      differing.push(`${hex(input)}: ${JSON.stringify(theirs)} / ${JSON.stringify(mine)}`);
  }
  return { compared, differing };
}

function* singleBytes(): Generator<number[]> {
  for (let b = 0; b < 256; b++) yield [b];
}

describe('decode, compared with iconv-lite', () => {
  it.each(SINGLE_BYTE)('%s: every byte iconv-lite decodes gives the same character', (codePage) => {
    // Act
    const { compared, differing } = disagreements(codePage, singleBytes());

    // Assess
    expect(differing).toEqual([]);
    expect(compared).toBeGreaterThan(220);
  });

  it.each(Object.keys(DOUBLE_BYTE))(
    '%s: every byte and byte pair iconv-lite decodes gives the same text',
    (codePage) => {
      // Prepare
      const { leads, trails } = DOUBLE_BYTE[codePage] ?? { leads: [], trails: [] };
      function* pairs(): Generator<number[]> {
        for (const lead of byteRanges(leads)) for (const trail of byteRanges(trails)) yield [lead, trail];
      }

      // Act
      const single = disagreements(codePage, singleBytes());
      const double = disagreements(codePage, pairs());

      // Assess
      expect(single.differing).toEqual([]);
      expect(double.differing).toEqual([]);
      expect(double.compared).toBeGreaterThan(7000);
    },
  );

  it.each(Object.keys(SAMPLES))('%s: text iconv-lite encodes comes back whole', (codePage) => {
    // Prepare
    const text = SAMPLES[codePage] ?? '';
    const bytes = iconv.encode(text, codePage);

    // Act
    const decoded = decode(bytes, codePage);

    // Assess
    expect(decoded).toBe(text);
    expect(decoded).toBe(iconv.decode(bytes, codePage));
  });

  it('CP932: the control bytes ICU swaps decode as in iconv-lite, alone and between double-byte characters', () => {
    // Prepare
    const bytes = Buffer.concat([
      Buffer.from([0x1a, 0x1c, 0x7f]),
      iconv.encode('日本', 'CP932'),
      Buffer.from([0x7f]),
    ]);

    // Act
    const decoded = decode(bytes, 'CP932');

    // Assess
    expect(decoded).toBe(iconv.decode(bytes, 'CP932'));
    expect(decoded).toBe('\u001a\u001c\u007f日本\u007f');
  });

  it.each(['utf-8', 'utf8'])(
    '%s: drops a byte order mark and replaces invalid bytes as iconv-lite does',
    (name) => {
      // Prepare
      const bytes = Buffer.concat([
        Buffer.from([0xef, 0xbb, 0xbf]),
        Buffer.from('héllo wörld 日本 😀', 'utf8'),
        Buffer.from([0xc3, 0x28, 0xff, 0xe2, 0x82]),
      ]);

      // Act
      const decoded = decode(bytes, name);

      // Assess
      expect(decoded).toBe(iconv.decode(bytes, name));
    },
  );

  it.each(['CP437', 'CP850', 'CP949', 'CP1200'])(
    '%s: refused with CodePageUnavailableError naming the code page',
    (codePage) => {
      // Act
      const act = () => decode(Buffer.from('abc'), codePage);

      // Assess
      expect(act).toThrow(CodePageUnavailableError);
      expect(act).toThrow(new RegExp(`code page ${codePage}.*NVARCHAR`));
    },
  );
  it("CP949 stays refused while Node's euc-kr decoder misreads CP949's Unified Hangul Code", () => {
    // Prepare: 갂 (U+AC02), the first syllable of the extension, and € (U+20AC), a later addition to CP949.
    const bytes = Buffer.from([0x81, 0x41, 0xa2, 0xe6]);

    // Act
    const node = new TextDecoder('euc-kr').decode(bytes);

    // Assess: when this fails, Node decodes CP949 and decode() could map CP949 to euc-kr.
    expect(iconv.decode(bytes, 'CP949')).toBe('\uac02\u20ac');
    expect(node).not.toBe('\uac02\u20ac');
  });
});

describe('encode, compared with iconv-lite', () => {
  it.each(SINGLE_BYTE)(
    '%s: every character of the code page, and ones it lacks, as iconv-lite writes them',
    (codePage) => {
      // Prepare
      const high = iconv.decode(Buffer.from(Array.from({ length: 128 }, (_, i) => 0x80 + i)), codePage);
      const text = `plain ASCII ~\u0000\u007f ${high.replaceAll('\ufffd', '')} 漢字 😀 \u0100\u2603`;

      // Act
      const encoded = encode(text, codePage);

      // Assess
      expect(hex([...encoded])).toBe(hex([...iconv.encode(text, codePage)]));
    },
  );

  it.each(['utf-8', 'utf8'])('%s: as iconv-lite writes it', (name) => {
    // Prepare
    const text = 'héllo 日本 😀 \ud800 lone surrogate';

    // Act
    const encoded = encode(text, name);

    // Assess
    expect(hex([...encoded])).toBe(hex([...iconv.encode(text, name)]));
  });

  it.each(['CP932', 'CP936', 'CP949', 'CP950', 'CP437', 'CP850'])('%s: refused', (codePage) => {
    // Act
    const act = () => encode('abc', codePage);

    // Assess
    expect(act).toThrow(CodePageUnavailableError);
  });
});

describe('what tedious calls', () => {
  it('every iconv-lite function tedious calls is exported, by name and on the default export', () => {
    // Prepare
    const lib = join(TEDIOUS, 'lib');
    const files = readdirSync(lib, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.js'));
    const called = new Set<string>();
    for (const file of files) {
      const source = readFileSync(join(lib, file), 'utf8');
      for (const match of source.matchAll(/\b(?:iconv|_iconvLite\.default)\.(\w+)\(/g))
        called.add(match[1] ?? '');
    }

    // Act
    const namespace: Record<string, unknown> = { decode, encode };

    // Assess
    expect([...called].sort()).toEqual(['decode', 'encode']);
    for (const name of called) {
      expect(typeof namespace[name]).toBe('function');
      expect((ours as Record<string, unknown>)[name]).toBe(namespace[name]);
    }
  });
});
