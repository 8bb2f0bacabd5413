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

import { log as host } from "./host.js";

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
export function log(level, message, fields = {}) {
  host.log(
    level,
    message,
    Object.entries(fields).map(([key, value]) => [
      key,
      typeof value === "string" ? value : stringify(value),
    ]),
  );
}

/** @param {unknown} value */
function stringify(value) {
  if (value instanceof Error) {
    return value.message;
  }
  return (
    JSON.stringify(value, (_, v) => (typeof v === "bigint" ? v.toString() : v)) ?? String(value)
  );
}

/** Writes one line at level `trace`. @param {string} message @param {Fields} [fields] */
export const trace = (message, fields) => log("trace", message, fields);
/** Writes one line at level `debug`. @param {string} message @param {Fields} [fields] */
export const debug = (message, fields) => log("debug", message, fields);
/** Writes one line at level `info`. @param {string} message @param {Fields} [fields] */
export const info = (message, fields) => log("info", message, fields);
/** Writes one line at level `warn`. @param {string} message @param {Fields} [fields] */
export const warn = (message, fields) => log("warn", message, fields);
/** Writes one line at level `error`. @param {string} message @param {Fields} [fields] */
export const error = (message, fields) => log("error", message, fields);
