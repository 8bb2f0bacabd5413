declare module 'kubewasm:controller/log@0.2.1' {
  /**
   * Writes one log line with key/value fields.
   */
  export function log(level: Level, message: string, fields: Array<[string, string]>): void;
  /**
   * Severity of a log line.
   * # Variants
   * 
   * ## `"trace"`
   * 
   * ## `"debug"`
   * 
   * ## `"info"`
   * 
   * ## `"warn"`
   * 
   * ## `"error"`
   */
  export type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error';
}
