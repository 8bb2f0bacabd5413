declare module 'kubewasm:controller/types@0.2.1' {
  /**
   * A Kubernetes kind: its API group (`""` for the core group), version and kind.
   */
  export interface Gvk {
    group: string,
    version: string,
    kind: string,
  }
  /**
   * A set of objects of one kind.
   */
  export interface Selection {
    kind: Gvk,
    /**
     * Only objects in this namespace; `none` means every namespace (or a cluster-scoped kind).
     */
    namespace?: string,
    /**
     * Only objects matching this label selector, in the API server's syntax
     * (`app=web,tier in (a,b),!legacy`).
     */
    labelSelector?: string,
  }
  /**
   * How a change to a watched object turns into keys of the primary kind.
   */
  export type Mapping = MappingOwner | MappingLabel | MappingGuest;
  /**
   * Enqueue every owner in the object's `ownerReferences` whose kind is the primary kind.
   */
  export interface MappingOwner {
    tag: 'owner',
  }
  /**
   * Enqueue the primary object, in the same namespace, named by this label's value.
   */
  export interface MappingLabel {
    tag: 'label',
    val: string,
  }
  /**
   * Call the guest's `map-keys` export with the changed object.
   */
  export interface MappingGuest {
    tag: 'guest',
  }
  /**
   * A kind the guest reads and reacts to without owning it.
   */
  export interface Watch {
    selection: Selection,
    mapping: Mapping,
  }
  /**
   * Which parts of a primary object an update must change to enqueue its key. Whatever is
   * set, the key is enqueued when the object is created (or replaced by a new object of the
   * same name) or deleted, when its deletion starts, when a live object lacks the guest's
   * finalizer, on resync and on reload, and when an owned or watched object maps to it. An update that changes none of the set parts is not reconciled, so a
   * guest that writes a timestamp into its primary's status does not reconcile it again.
   */
  export interface Changes {
    /**
     * `metadata.generation`: for a kind with a `status` subresource, the spec changed.
     * Kinds without a generation never match.
     */
    generation?: boolean,
    /**
     * `metadata.labels`.
     */
    labels?: boolean,
    /**
     * `metadata.annotations`.
     */
    annotations?: boolean,
    /**
     * Any change at all, status and finalizers included: every update matches.
     */
    any?: boolean,
  }
  /**
   * What a guest declares about itself. The host reads it once per loaded module.
   */
  export interface ControllerMetadata {
    /**
     * The controller's name: the `controller` label of its metrics and the suffix of its
     * field manager (`kubewasm-<name>`). Lowercase letters, digits and `-`.
     */
    name: string,
    /**
     * The kind this controller reconciles; one key per object.
     */
    primary: Selection,
    /**
     * Kinds this controller creates and owns; a change to one enqueues its controller owner.
     */
    owns: Array<Gvk>,
    /**
     * Other kinds whose changes enqueue keys through a mapping.
     */
    watches: Array<Watch>,
    /**
     * A finalizer the host adds to every primary object, and removes once `finalize`
     * succeeds on deletion.
     */
    finalizer?: string,
    /**
     * How many keys of this controller may be reconciled at the same time (at least 1).
     */
    maxConcurrency: number,
    /**
     * Every primary object is enqueued again after this many seconds without a change.
     */
    resyncSeconds?: number,
    /**
     * Which updates of a primary object enqueue its key.
     */
    reconcileOn: Changes,
  }
  /**
   * The name of one object.
   */
  export interface ObjectKey {
    /**
     * `none` for a cluster-scoped object.
     */
    namespace?: string,
    name: string,
  }
  /**
   * Why a key was queued. When several reasons arrive before the key is handed out, the
   * first one is kept.
   * # Variants
   * 
   * ## `"added"`
   * 
   * The object appeared.
   * ## `"changed"`
   * 
   * The object changed.
   * ## `"deleted"`
   * 
   * The object is gone; the request carries no object.
   * ## `"owned-changed"`
   * 
   * An object this controller owns changed.
   * ## `"watched-changed"`
   * 
   * A watched object mapped to this key changed.
   * ## `"resync"`
   * 
   * The resync period elapsed.
   * ## `"requeue"`
   * 
   * The previous reconcile asked for it or failed.
   * ## `"reload"`
   * 
   * A new version of this controller's module was loaded.
   */
  export type Reason = 'added' | 'changed' | 'deleted' | 'owned-changed' | 'watched-changed' | 'resync' | 'requeue' | 'reload';
  /**
   * One reconcile request.
   */
  export interface Request {
    key: ObjectKey,
    reason: Reason,
    /**
     * 1 on the first try, counting up while reconciles of this key keep failing.
     */
    attempt: number,
    /**
     * The primary object as the cache holds it now, or `none` when it no longer exists.
     */
    object?: string,
  }
  /**
   * How a successful reconcile ends.
   */
  export type Outcome = OutcomeDone | OutcomeRequeueAfter;
  /**
   * Nothing more to do until the next change.
   */
  export interface OutcomeDone {
    tag: 'done',
  }
  /**
   * Reconcile this key again after this many milliseconds.
   */
  export interface OutcomeRequeueAfter {
    tag: 'requeue-after',
    val: bigint,
  }
  /**
   * How a failed reconcile ends.
   */
  export type ReconcileError = ReconcileErrorTransient | ReconcileErrorPermanent;
  /**
   * Retry with per-key exponential backoff.
   */
  export interface ReconcileErrorTransient {
    tag: 'transient',
    val: string,
  }
  /**
   * Do not retry until the object changes; the error is logged and counted.
   */
  export interface ReconcileErrorPermanent {
    tag: 'permanent',
    val: string,
  }
  /**
   * A status returned by the API server.
   */
  export interface ApiStatus {
    /**
     * HTTP status code, e.g. 404 or 409.
     */
    code: number,
    /**
     * Machine-readable reason, e.g. `NotFound`, `Conflict`, `AlreadyExists`.
     */
    reason: string,
    message: string,
  }
  /**
   * Why a host call failed.
   */
  export type Error = ErrorApi | ErrorDenied | ErrorInvalid | ErrorUnavailable;
  /**
   * The API server refused the request.
   */
  export interface ErrorApi {
    tag: 'api',
    val: ApiStatus,
  }
  /**
   * This guest may not do this: the kind, verb or namespace is not declared or not
   * granted.
   */
  export interface ErrorDenied {
    tag: 'denied',
    val: string,
  }
  /**
   * The request itself is malformed: invalid JSON, a missing field, a wrong kind.
   */
  export interface ErrorInvalid {
    tag: 'invalid',
    val: string,
  }
  /**
   * The API server could not be reached in time; retrying later may succeed.
   */
  export interface ErrorUnavailable {
    tag: 'unavailable',
    val: string,
  }
}
