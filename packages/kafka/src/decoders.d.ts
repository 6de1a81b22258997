/** Types of the pure-JavaScript codecs `compression.ts` uses (neither package ships its own). */

declare module 'lz4js' {
  const lz4: {
    /** Decompresses one LZ4 frame. */
    decompress(src: Uint8Array, maxSize?: number): Uint8Array | number[];
    /**
     * Decompresses one LZ4 frame into `dst`; the bytes it produced (writes past the end of `dst` are dropped but
     * counted).
     */
    decompressFrame(src: Uint8Array, dst: Uint8Array): number;
    /** Compresses to one LZ4 frame (tests only). */
    compress(src: Uint8Array, maxSize?: number): Uint8Array | number[];
  };
  export default lz4;
}

declare module 'snappyjs' {
  const snappy: {
    /** Decompresses one raw snappy block; a Buffer in gives a Buffer out. */
    uncompress(compressed: Uint8Array, maxLength?: number): Uint8Array;
    /** Compresses to one raw snappy block (tests only). */
    compress(uncompressed: Uint8Array): Uint8Array;
  };
  export default snappy;
}
