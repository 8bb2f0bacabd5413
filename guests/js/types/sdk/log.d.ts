/**
 * Structured logging into the host's logs; the host tags every line with the controller and the
 * key being reconciled:
 *
 * ```js
 * log.info("created pod", { pod: "web-x7k2p", replicas: 3 });
 * ```
 *
 * Field values are written as strings: strings as they are, errors by their message, other
 * values as JSON.
 */
export type Level = "trace" | "debug" | "info" | "warn" | "error";
export type Fields = Record<string, unknown>;
/**
 * @typedef {"trace" | "debug" | "info" | "warn" | "error"} Level
 * @typedef {Record<string, unknown>} Fields
 */
/**
 * Writes one line at `level` with key/value `fields`.
 * @param {Level} level
 * @param {string} message
 * @param {Fields} [fields]
 */
export declare function log(level: Level, message: string, fields?: Fields): void;
/** Writes one line at level `trace`. @param {string} message @param {Fields} [fields] */
export declare const trace: (message: string, fields?: Fields) => void;
/** Writes one line at level `debug`. @param {string} message @param {Fields} [fields] */
export declare const debug: (message: string, fields?: Fields) => void;
/** Writes one line at level `info`. @param {string} message @param {Fields} [fields] */
export declare const info: (message: string, fields?: Fields) => void;
/** Writes one line at level `warn`. @param {string} message @param {Fields} [fields] */
export declare const warn: (message: string, fields?: Fields) => void;
/** Writes one line at level `error`. @param {string} message @param {Fields} [fields] */
export declare const error: (message: string, fields?: Fields) => void;
