/// <reference path="./kubewasm-controller-types.d.ts" />
declare module 'kubewasm:controller/events@0.2.1' {
  /**
   * Records an event. Events are best effort: repeated ones may be merged or dropped. The
   * object is named as for a write; a reason or action that is empty or over 128 bytes, or a
   * note over 1024 bytes, is `invalid`, as the API server refuses those fields.
   */
  export function recordEvent(event: Event): void;
  export type Gvk = import('kubewasm:controller/types@0.2.1').Gvk;
  export type Error = import('kubewasm:controller/types@0.2.1').Error;
  /**
   * The type of an event.
   * # Variants
   * 
   * ## `"normal"`
   * 
   * ## `"warning"`
   */
  export type EventType = 'normal' | 'warning';
  /**
   * An event about one object.
   */
  export interface Event {
    /**
     * The object the event is about; its uid is filled in from the cache.
     */
    regardingKind: Gvk,
    regardingNamespace?: string,
    regardingName: string,
    eventType: EventType,
    /**
     * A short CamelCase reason, e.g. `Scaled`.
     */
    reason: string,
    /**
     * What the controller did, e.g. `Create`.
     */
    action: string,
    /**
     * Human-readable text.
     */
    note: string,
  }
}
