/**
 * Random object names, like the API server's `generateName`.
 */

/** The API server's alphabet for generated names: no vowels (no words), no look-alikes. */
export const ALPHABET = "bcdfghjklmnpqrstvwxz2456789";
/** Longest base kept (in UTF-8 bytes), so that base plus suffix fits in 63 characters. */
const MAX_BASE = 58;
const SUFFIX = 5;
/** Random bytes at or above this are redrawn, so that every character is equally likely. */
const UNBIASED = 256 - (256 % ALPHABET.length);

/**
 * `base` followed by 5 random characters of {@link ALPHABET}, e.g. `generateName("web-")` →
 * `web-x7k2p`.
 *
 * Server-side apply has no `generateName`, so guests name new objects themselves. `base` is cut
 * to 58 UTF-8 bytes (at a character boundary) as the API server does. Randomness comes from
 * `crypto.getRandomValues`, which reads the WASI random source at call time in a guest. Check
 * the cache for an object of the same name before applying: an apply to an existing name
 * updates that object.
 *
 * @param {string} base
 */
export function generateName(base) {
  let kept = "";
  let bytes = 0;
  for (const char of base) {
    const size = new TextEncoder().encode(char).length;
    if (bytes + size > MAX_BASE) {
      break;
    }
    kept += char;
    bytes += size;
  }
  let suffix = "";
  const random = new Uint8Array(SUFFIX * 2);
  while (suffix.length < SUFFIX) {
    crypto.getRandomValues(random);
    for (const byte of random) {
      if (byte < UNBIASED && suffix.length < SUFFIX) {
        suffix += ALPHABET[byte % ALPHABET.length];
      }
    }
  }
  return kept + suffix;
}
