/**
 * Random object names, like the API server's `generateName`.
 */
/** The API server's alphabet for generated names: no vowels (no words), no look-alikes. */
export declare const ALPHABET = "bcdfghjklmnpqrstvwxz2456789";
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
export declare function generateName(base: string): string;
