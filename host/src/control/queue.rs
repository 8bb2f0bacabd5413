//! Per-controller workqueue with client-go semantics.
//!
//! Keys are deduplicated while queued, never handed to two workers at once, can be delayed
//! (`add_after`) or retried (`add_rate_limited`) after the longer of a per-key exponential
//! backoff and a token bucket shared by all retries (client-go's default controller rate
//! limiter: 5 ms doubling up to 1000 s, 10 per second after a burst of 100), and the queue shuts
//! down either immediately or after in-flight work drained. Every key carries the reason of the
//! first add since it was last handed out.
//!
//! As controller-runtime's priority queue, keys come in two lanes: keys added with
//! [`WorkQueue::add_low`] (an initial list, a resync, a reload) are handed out only when no other
//! key is ready, so a real change is reconciled before a backlog of them; a low key added again
//! normally moves to the front lane, while a key requeued or retried from a reconcile, or added
//! again for a change the reconcile made itself, keeps the lane it was handed out from. Like client-go's, the queue times how long keys wait and how long
//! they are processed.
//!
//! The queues of one host share their [`Lanes`]: while a key of a front lane waits or runs in any
//! of them, the low lanes together keep no more keys in flight than the CPUs the front lanes
//! leave (one at least), so a change is not reconciled among a crowd of backlog keys of other
//! guests, such as the whole backlog a standby starts on when it wins its Lease. A backlog that
//! starts from idle starts slow, with as many keys in flight across the queues as CPUs and one
//! more each time one ends, so that a change arriving as it starts finds a worker of its guest
//! free, unless the guest has no more workers than the host has CPUs.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::Hash;
use std::mem;
use std::num::NonZero;
use std::ops::ControlFlow;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::{Instant, timeout_at};

use crate::config::QueueConfig;
use crate::histogram::{Histogram, WORKQUEUE_BUCKETS};
use crate::rate::TokenBucket;

/// A key handed out by [`WorkQueue::next`]; the worker must call [`WorkQueue::done`] with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item<K, R> {
    /// The key to reconcile.
    pub key: K,
    /// Reason of the first add since the key was last handed out.
    pub reason: R,
    /// Time between the key becoming queued (or its delayed add firing) and this hand-out.
    pub queued_for: Duration,
}

/// Snapshot of the queue's metrics, named after client-go's workqueue metrics.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct QueueStats {
    /// Keys ready to be handed out (`workqueue_depth`).
    pub depth: usize,
    /// Adds accepted before shutdown, including deduplicated ones and fired delayed adds.
    pub adds_total: u64,
    /// Calls to [`WorkQueue::add_rate_limited`] before shutdown.
    pub retries_total: u64,
    /// Sum over in-flight keys of the seconds since they were handed out.
    pub unfinished_work_seconds: f64,
    /// Longest time in seconds any in-flight key has been processed.
    pub longest_running_processor_seconds: f64,
}

/// The low lanes of every queue of one host, as one. While a served queue holds a key of its front
/// lane, ready or in flight (an urgent key), low-lane keys are handed out only while fewer of them
/// are in flight, across the queues, than the CPUs the urgent keys leave, one at least: a change
/// shares the CPUs with few backlog reconciles however many workers the guests have, and the
/// backlog always moves. With no urgent key, the low lanes start from idle (no key in flight)
/// with as many keys in flight as CPUs and take one more each time one ends: a backlog reaches
/// every worker within a few rounds of reconciles, while a change arriving meanwhile finds a
/// worker free. Room freed goes to the queues whose workers waited for it, in the order they
/// first did, so one queue's backlog never holds the room while another's waits.
#[derive(Debug)]
pub struct Lanes {
    cpus: usize,
    counts: Mutex<Counts>,
    /// Notified when the room for low-lane keys may have grown, or its turn passed on.
    freed: Notify,
    /// The id of the next queue that shares these lanes.
    next_queue: AtomicU64,
}

#[derive(Debug, Default)]
struct Counts {
    /// Urgent keys of every served queue.
    urgent: usize,
    /// Low-lane keys in flight in every queue.
    backlog: usize,
    /// The queues with a worker waiting for room, in the order they were first refused it.
    waiting: VecDeque<u64>,
    /// Low-lane keys that may be in flight while no key is urgent: as many as the CPUs when
    /// the low lanes start from idle, one more each time one ends.
    ramp: usize,
}

impl Lanes {
    /// Lanes for a host of `cpus` CPUs (one at least).
    pub fn new(cpus: usize) -> Arc<Self> {
        let cpus = cpus.max(1);
        Arc::new(Self {
            cpus,
            counts: Mutex::new(Counts {
                ramp: cpus,
                ..Counts::default()
            }),
            freed: Notify::new(),
            next_queue: AtomicU64::new(0),
        })
    }

    /// Lanes for this process: as many CPUs as it may run on.
    pub fn of_host() -> Arc<Self> {
        Self::new(std::thread::available_parallelism().map_or(1, NonZero::get))
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts one more low-lane key of `queue` in flight if there is room for it and it is
    /// `queue`'s turn; else puts `queue` in line for the room, if it is not yet.
    fn admit_low(&self, queue: u64) -> bool {
        let mut counts = self.counts();
        let room = if counts.urgent > 0 {
            self.cpus.saturating_sub(counts.urgent).max(1)
        } else {
            counts.ramp
        };
        let turn = counts.waiting.front().is_none_or(|first| *first == queue);
        if !turn || counts.backlog >= room {
            if !counts.waiting.contains(&queue) {
                counts.waiting.push_back(queue);
            }
            return false;
        }
        counts.backlog += 1;
        let passed_on = counts.waiting.front() == Some(&queue) && {
            counts.waiting.pop_front();
            // The next in line may have been refused its turn before this one came.
            !counts.waiting.is_empty() && counts.backlog < room
        };
        drop(counts);
        if passed_on {
            self.freed.notify_waiters();
        }
        true
    }

    /// Notes that a queue's low lane, empty, has a key ready: with no low-lane key in flight, a
    /// backlog starts from idle, so it starts slow again.
    fn backlog_arrives(&self) {
        let mut counts = self.counts();
        if counts.backlog == 0 {
            counts.ramp = self.cpus;
        }
    }

    /// Takes `queue` out of line: none of its workers waits for room any more.
    fn withdraw(&self, queue: u64) {
        let mut counts = self.counts();
        let Some(at) = counts.waiting.iter().position(|waiting| *waiting == queue) else {
            return;
        };
        counts.waiting.remove(at);
        drop(counts);
        if at == 0 {
            self.freed.notify_waiters();
        }
    }

    /// Counts `done` low-lane keys out of flight.
    fn release_low(&self, done: usize) {
        if done > 0 {
            let mut counts = self.counts();
            counts.backlog -= done;
            counts.ramp = counts.ramp.saturating_add(done);
            drop(counts);
            self.freed.notify_waiters();
        }
    }

    /// Replaces a queue's `from` urgent keys by `to`.
    fn recount_urgent(&self, from: usize, to: usize) {
        let mut counts = self.counts();
        counts.urgent = counts.urgent - from + to;
        drop(counts);
        if to < from {
            self.freed.notify_waiters();
        }
    }
}

struct Dirty<R> {
    reason: R,
    since: Instant,
    /// In the low-priority lane.
    low: bool,
}

/// A key handed out: when, and from which lane.
struct InFlight {
    since: Instant,
    low: bool,
}

struct Delayed<R> {
    at: Instant,
    seq: u64,
    reason: R,
    /// For the low-priority lane.
    low: bool,
}

/// Invariant: a key is ready exactly when it is in `dirty` and not in `processing`; then the
/// lane its `low` names holds it. A lane may also hold stale entries (keys handed out since, or
/// moved to the front lane), which [`State::pop`] skips.
struct State<K, R> {
    high: VecDeque<K>,
    low: VecDeque<K>,
    /// Keys ready to be handed out.
    ready: usize,
    /// Keys of `ready` in the front lane.
    ready_front: usize,
    dirty: HashMap<K, Dirty<R>>,
    /// In-flight keys.
    processing: HashMap<K, InFlight>,
    /// Keys of `processing` handed out from the front lane.
    running_front: usize,
    lanes: Arc<Lanes>,
    /// This queue's id in `lanes`.
    id: u64,
    /// Workers waiting for room in `lanes`: only while one does is the queue in their line.
    blocked: usize,
    /// Whether workers take keys: only then are urgent keys counted in `lanes`.
    served: bool,
    /// The urgent keys last counted in `lanes`.
    counted: usize,
    delayed: HashMap<K, Delayed<R>>,
    /// Delayed keys ordered by deadline; `seq` makes entries unique.
    timers: BTreeMap<(Instant, u64), K>,
    next_seq: u64,
    failures: HashMap<K, u32>,
    /// The bucket shared by every retry.
    retries: TokenBucket,
    shut_down: bool,
    adds_total: u64,
    retries_total: u64,
    /// Keys made ready under the current lock; each earns one `notify_one`.
    wake_one: usize,
    /// Waiters must re-evaluate (shutdown or a new earliest deadline).
    wake_all: bool,
}

impl<K: Clone + Eq + Hash, R> State<K, R> {
    fn add(&mut self, key: K, reason: R, since: Instant, low: bool) {
        if self.shut_down {
            return;
        }
        self.adds_total += 1;
        let processing = self.processing.contains_key(&key);
        if let Some(dirty) = self.dirty.get_mut(&key) {
            if dirty.low && !low {
                dirty.low = false;
                if !processing {
                    self.high.push_back(key);
                    self.ready_front += 1;
                    // A worker may wait for room for it in the low lane.
                    self.wake_one += 1;
                }
            }
            return;
        }
        if !processing {
            self.make_ready(key.clone(), low);
        }
        self.dirty.insert(key, Dirty { reason, since, low });
    }

    /// Puts a dirty key not in flight in its lane; a key made ready in an empty low lane may
    /// start a backlog (see [`Lanes::backlog_arrives`]).
    fn make_ready(&mut self, key: K, low: bool) {
        if low && self.ready == self.ready_front {
            self.lanes.backlog_arrives();
        }
        self.lane(low).push_back(key);
        self.ready += 1;
        self.ready_front += usize::from(!low);
        self.wake_one += 1;
    }

    /// Whether `key` is in flight, handed out from the low lane.
    fn in_flight_low(&self, key: &K) -> bool {
        self.processing.get(key).is_some_and(|key| key.low)
    }

    fn lane(&mut self, low: bool) -> &mut VecDeque<K> {
        if low { &mut self.low } else { &mut self.high }
    }

    fn add_after(&mut self, key: K, reason: R, now: Instant, delay: Duration) {
        let mut low = self.in_flight_low(&key);
        if self.shut_down || delay.is_zero() {
            return self.add(key, reason, now, low);
        }
        let at = now + delay;
        if let Some(old) = self.delayed.get_mut(&key) {
            if old.at <= at {
                old.low &= low;
                return;
            }
            low &= old.low;
            self.timers.remove(&(old.at, old.seq));
        }
        if self
            .timers
            .first_key_value()
            .is_none_or(|(&(first, _), _)| at < first)
        {
            self.wake_all = true;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.timers.insert((at, seq), key.clone());
        self.delayed.insert(
            key,
            Delayed {
                at,
                seq,
                reason,
                low,
            },
        );
    }

    fn fire_due(&mut self, now: Instant) {
        while let Some(timer) = self.timers.first_entry()
            && timer.key().0 <= now
        {
            let key = timer.remove();
            let Delayed {
                at, reason, low, ..
            } = self.delayed.remove(&key).expect("timer has entry");
            self.add(key, reason, at, low);
        }
    }

    /// Keys of the front lane, ready or in flight, once the queue is served.
    fn urgent(&self) -> usize {
        if self.served {
            self.ready_front + self.running_front
        } else {
            0
        }
    }

    /// Counts a worker that `was` waiting for room as one that `is`; once none waits, the queue
    /// leaves the line for room.
    fn wait_for_room(&mut self, was: bool, is: bool) {
        self.blocked = self.blocked - usize::from(was) + usize::from(is);
        if self.blocked == 0 {
            self.lanes.withdraw(self.id);
        }
    }

    /// Brings the count of urgent keys in `lanes` up to date.
    fn recount(&mut self) {
        let urgent = self.urgent();
        if urgent != self.counted {
            self.lanes.recount_urgent(self.counted, urgent);
            self.counted = urgent;
        }
    }

    /// Hands out the first ready key of the front lane, else of the low lane if `lanes` has
    /// room for it.
    fn pop(&mut self, now: Instant) -> Option<Item<K, R>> {
        let low = match (self.ready_front, self.ready) {
            (0, 0) => return None,
            (0, _) if !self.lanes.admit_low(self.id) => return None,
            (0, _) => true,
            _ => false,
        };
        let key = loop {
            let key = self
                .lane(low)
                .pop_front()
                .expect("a ready key is in its lane");
            let ready = !self.processing.contains_key(&key)
                && self.dirty.get(&key).is_some_and(|d| d.low == low);
            if ready {
                break key;
            }
        };
        let Dirty { reason, since, .. } = self.dirty.remove(&key).expect("ready key is dirty");
        self.ready -= 1;
        if !low {
            self.ready_front -= 1;
            self.running_front += 1;
        }
        self.processing
            .insert(key.clone(), InFlight { since: now, low });
        Some(Item {
            key,
            reason,
            queued_for: now.saturating_duration_since(since),
        })
    }
}

/// A deduplicating, rate-limited, delaying workqueue shared (as `Arc`) by producers and workers.
///
/// Guarantees: a key is never handed to two workers at once and never queued twice; a key added
/// while in flight is handed out again (once) after [`done`](Self::done); after
/// [`shut_down`](Self::shut_down) adds are ignored and [`next`](Self::next) returns `None`.
pub struct WorkQueue<K, R = ()> {
    config: QueueConfig,
    lanes: Arc<Lanes>,
    state: Mutex<State<K, R>>,
    ready: Notify,
    drained: Notify,
    queue_duration: Histogram,
    work_duration: Histogram,
}

impl<K, R> WorkQueue<K, R>
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
    R: Clone + Send + Sync + 'static,
{
    /// Creates an empty queue with the given backoff settings, sharing `lanes` with the other
    /// queues of its host.
    pub fn new(config: QueueConfig, lanes: Arc<Lanes>) -> Self {
        let state = State {
            high: VecDeque::new(),
            low: VecDeque::new(),
            ready: 0,
            ready_front: 0,
            dirty: HashMap::new(),
            processing: HashMap::new(),
            running_front: 0,
            id: lanes.next_queue.fetch_add(1, Ordering::Relaxed),
            lanes: lanes.clone(),
            blocked: 0,
            served: false,
            counted: 0,
            delayed: HashMap::new(),
            timers: BTreeMap::new(),
            next_seq: 0,
            failures: HashMap::new(),
            retries: TokenBucket::default(),
            shut_down: false,
            adds_total: 0,
            retries_total: 0,
            wake_one: 0,
            wake_all: false,
        };
        Self {
            config,
            lanes,
            state: Mutex::new(state),
            ready: Notify::new(),
            drained: Notify::new(),
            queue_duration: Histogram::new(WORKQUEUE_BUCKETS),
            work_duration: Histogram::new(WORKQUEUE_BUCKETS),
        }
    }

    /// Runs `f` under the lock after firing due timers, then wakes waiters as needed.
    fn with_state<T>(&self, f: impl FnOnce(&mut State<K, R>, Instant) -> T) -> T {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.fire_due(now);
        let out = f(&mut state, now);
        state.recount();
        let wake_one = mem::take(&mut state.wake_one).min(state.ready);
        let wake_all = mem::take(&mut state.wake_all);
        let drained = state.shut_down && state.processing.is_empty();
        drop(state);
        if wake_all {
            self.ready.notify_waiters();
        }
        for _ in 0..wake_one {
            self.ready.notify_one();
        }
        if drained {
            self.drained.notify_waiters();
        }
        out
    }

    /// Queues `key`. No-op if it is already queued (the first reason is kept) or the queue is shut
    /// down; if it is in flight it is handed out again after [`done`](Self::done).
    pub fn add(&self, key: K, reason: R) {
        self.with_state(|st, now| st.add(key, reason, now, false));
    }

    /// Queues `key` in the low-priority lane, as [`add`](Self::add) otherwise: it is handed out
    /// only when no key of the front lane is ready.
    pub fn add_low(&self, key: K, reason: R) {
        self.with_state(|st, now| st.add(key, reason, now, true));
    }

    /// Queues `key` for a change its own reconcile made, such as the watch showing an object it
    /// applied: while the key is in flight, in the lane it was handed out from, so that a backlog
    /// reconcile does not make its next round a change; else as [`add`](Self::add).
    pub fn add_own(&self, key: K, reason: R) {
        self.with_state(|st, now| {
            let low = st.in_flight_low(&key);
            st.add(key, reason, now, low);
        });
    }

    /// Adds `key` once `delay` has passed (immediately for zero). If the key already has a
    /// pending delayed add, the earlier deadline (and its reason) wins. A key added while in
    /// flight, as a requeue or a retry, keeps the lane it was handed out from, as
    /// controller-runtime's controllers retain an item's priority; any other goes to the front
    /// lane, and of two delayed adds of one key, the front lane wins.
    pub fn add_after(&self, key: K, reason: R, delay: Duration) {
        self.with_state(|st, now| st.add_after(key, reason, now, delay));
    }

    /// Schedules `key` after the longer of its backoff `base_delay * 2^failures` (capped at
    /// `max_delay`) and the wait for a token of the retry bucket, counts one more failure and
    /// returns the delay used.
    pub fn add_rate_limited(&self, key: K, reason: R) -> Duration {
        let config = self.config;
        self.with_state(|st, now| {
            let failures = st.failures.entry(key.clone()).or_default();
            let backoff = 2u32
                .checked_pow(*failures)
                .and_then(|factor| config.base_delay.checked_mul(factor))
                .map_or(config.max_delay, |delay| delay.min(config.max_delay));
            *failures = failures.saturating_add(1);
            let (qps, burst) = (f64::from(config.qps), f64::from(config.burst));
            let delay = backoff.max(st.retries.reserve(qps, burst, now.into_std()));
            if !st.shut_down {
                st.retries_total += 1;
            }
            st.add_after(key, reason, now, delay);
            delay
        })
    }

    /// Resets the failure count of `key` (call after a successful reconcile).
    pub fn forget(&self, key: &K) {
        self.with_state(|st, _| st.failures.remove(key));
    }

    /// Number of failures counted for `key` since it was last forgotten.
    pub fn num_requeues(&self, key: &K) -> u32 {
        self.with_state(|st, _| st.failures.get(key).copied().unwrap_or(0))
    }

    /// Counts this queue's urgent keys in its [`Lanes`] from now on: call it once its workers
    /// take keys, or are about to, so that a queue nobody works on never holds the backlog of
    /// the others back.
    pub fn serve(&self) {
        self.with_state(|st, _| st.served = true);
    }

    /// Waits for a ready key and marks it in flight. Returns `None` once the queue is shut down.
    /// Cancel-safe: dropping the future never loses a key.
    pub async fn next(&self) -> Option<Item<K, R>> {
        let mut waiting = Waiting {
            queue: self,
            blocked: false,
        };
        loop {
            let mut notified = pin!(self.ready.notified());
            notified.as_mut().enable();
            let mut freed = pin!(self.lanes.freed.notified());
            freed.as_mut().enable();
            let step = self.with_state(|st, now| {
                let step = if st.shut_down {
                    ControlFlow::Break(None)
                } else {
                    match st.pop(now) {
                        Some(item) => ControlFlow::Break(Some(item)),
                        // With keys ready, only low-lane ones for which `lanes` has no room.
                        None => ControlFlow::Continue((
                            st.timers.first_key_value().map(|(k, _)| k.0),
                            st.ready > 0,
                        )),
                    }
                };
                let blocked = matches!(step, ControlFlow::Continue((_, true)));
                st.wait_for_room(mem::replace(&mut waiting.blocked, blocked), blocked);
                step
            });
            let (deadline, blocked) = match step {
                ControlFlow::Break(item) => {
                    if let Some(item) = &item {
                        self.queue_duration.observe(item.queued_for);
                    }
                    return item;
                }
                ControlFlow::Continue(wait) => wait,
            };
            let woken = async {
                if blocked {
                    tokio::select! {
                        () = notified => {}
                        () = freed => {}
                    }
                } else {
                    notified.await;
                }
            };
            match deadline {
                Some(deadline) => {
                    let _ = timeout_at(deadline, woken).await;
                }
                None => woken.await,
            }
        }
    }

    /// Marks `key` as processed; if it was added meanwhile it becomes ready again now.
    pub fn done(&self, key: &K) {
        let worked = self.with_state(|st, now| {
            let handed_out = st.processing.remove(key)?;
            if handed_out.low {
                st.lanes.release_low(1);
            } else {
                st.running_front -= 1;
            }
            if let Some(low) = st.dirty.get(key).map(|d| d.low) {
                st.make_ready(key.clone(), low);
            }
            Some(now.saturating_duration_since(handed_out.since))
        });
        if let Some(worked) = worked {
            self.work_duration.observe(worked);
        }
    }

    /// Stops the queue: later adds are ignored, queued and delayed keys are dropped and every
    /// current and future [`next`](Self::next) returns `None`. In-flight keys may still call
    /// [`done`](Self::done).
    pub fn shut_down(&self) {
        self.with_state(|st, _| {
            st.shut_down = true;
            st.wake_all = true;
            st.high.clear();
            st.low.clear();
            st.ready = 0;
            st.ready_front = 0;
            st.dirty.clear();
            st.delayed.clear();
            st.timers.clear();
        });
    }

    /// Shuts down like [`shut_down`](Self::shut_down), then waits until no key is in flight.
    pub async fn shut_down_and_drain(&self) {
        self.shut_down();
        loop {
            let mut drained = pin!(self.drained.notified());
            drained.as_mut().enable();
            if self.in_flight() == 0 {
                return;
            }
            drained.await;
        }
    }

    /// Number of keys ready to be handed out (not in flight, not delayed).
    pub fn len(&self) -> usize {
        self.with_state(|st, _| st.ready)
    }

    /// Whether no key is ready to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of keys handed out and not yet [`done`](Self::done).
    pub fn in_flight(&self) -> usize {
        self.with_state(|st, _| st.processing.len())
    }

    /// Number of keys waiting for a delayed add to fire.
    pub fn delayed(&self) -> usize {
        self.with_state(|st, _| st.delayed.len())
    }

    /// How long keys waited before being handed out: each hand-out records its
    /// [`Item::queued_for`] (`workqueue_queue_duration_seconds`).
    pub fn queue_duration(&self) -> &Histogram {
        &self.queue_duration
    }

    /// How long keys were processed: each [`done`](Self::done) of an in-flight key records the
    /// time since its hand-out (`workqueue_work_duration_seconds`).
    pub fn work_duration(&self) -> &Histogram {
        &self.work_duration
    }

    /// Current metrics snapshot.
    pub fn stats(&self) -> QueueStats {
        self.with_state(|st, now| {
            let running = st
                .processing
                .values()
                .map(|key| now.saturating_duration_since(key.since).as_secs_f64());
            QueueStats {
                depth: st.ready,
                adds_total: st.adds_total,
                retries_total: st.retries_total,
                // Not `sum`: the sum of no f64 is -0.
                unfinished_work_seconds: running.clone().fold(0.0, |sum, s| sum + s),
                longest_running_processor_seconds: running.fold(0.0, f64::max),
            }
        })
    }
}

/// A call of [`WorkQueue::next`]; counted among the queue's workers waiting for room while it
/// waits for it, until it returns or is dropped.
struct Waiting<'a, K: Clone + Eq + Hash, R> {
    queue: &'a WorkQueue<K, R>,
    blocked: bool,
}

impl<K: Clone + Eq + Hash, R> Drop for Waiting<'_, K, R> {
    fn drop(&mut self) {
        if self.blocked {
            let mut state = self
                .queue
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            state.wait_for_room(true, false);
        }
    }
}

impl<K, R> Drop for WorkQueue<K, R> {
    /// Takes the queue's urgent and in-flight low-lane keys out of its lanes' counts, and the
    /// queue out of their line.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        self.lanes.withdraw(state.id);
        self.lanes.recount_urgent(state.counted, 0);
        self.lanes
            .release_low(state.processing.values().filter(|key| key.low).count());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use std::collections::HashSet;
    use std::sync::Arc;
    use tokio::time::{sleep, timeout};

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Why {
        Added,
        Changed,
        Deleted,
    }
    use Why::*;

    type Queue = Arc<WorkQueue<&'static str, Why>>;

    fn queue() -> Queue {
        Arc::new(WorkQueue::new(QueueConfig::default(), Lanes::new(2)))
    }

    /// A served queue sharing `lanes`.
    fn sharing(lanes: &Arc<Lanes>) -> Queue {
        let q = Arc::new(WorkQueue::new(QueueConfig::default(), lanes.clone()));
        q.serve();
        q
    }

    /// Awaits `fut`, failing instead of hanging if it does not finish within an hour.
    async fn within<T>(fut: impl Future<Output = T>) -> T {
        timeout(Duration::from_secs(3600), fut)
            .await
            .expect("timed out")
    }

    async fn take(q: &Queue) -> Item<&'static str, Why> {
        within(q.next()).await.expect("queue shut down")
    }

    /// Asserts nothing is handed out within an hour of (paused) time.
    async fn assert_idle(q: &Queue) {
        assert!(timeout(Duration::from_secs(3600), q.next()).await.is_err());
    }

    fn spawn_next(q: &Queue) -> tokio::task::JoinHandle<Option<Item<&'static str, Why>>> {
        let q = q.clone();
        tokio::spawn(async move { q.next().await })
    }

    #[tokio::test(start_paused = true)]
    async fn dedup_keeps_first_reason() {
        let q = queue();
        q.add("a", Added);
        q.add("a", Changed);
        q.add("b", Changed);
        assert_eq!(q.len(), 2);
        let a = take(&q).await;
        assert_eq!((a.key, a.reason), ("a", Added));
        q.add("a", Deleted);
        q.add("a", Changed);
        assert_eq!(take(&q).await.key, "b");
        assert!(q.is_empty());
        q.done(&"a");
        assert_eq!(take(&q).await.reason, Deleted);
        q.done(&"a");
        q.done(&"b");
        assert_idle(&q).await;
        assert_eq!(q.stats().adds_total, 5);
    }

    #[tokio::test(start_paused = true)]
    async fn in_flight_key_is_not_handed_out_twice() {
        let q = queue();
        q.add("a", Added);
        take(&q).await;
        q.add("a", Changed);
        let worker = spawn_next(&q);
        sleep(Duration::from_secs(10)).await;
        assert!(!worker.is_finished());
        assert_eq!((q.len(), q.in_flight()), (0, 1));
        q.done(&"a");
        let again = within(worker).await.unwrap().unwrap();
        assert_eq!((again.key, again.reason), ("a", Changed));
        assert_eq!(again.queued_for, Duration::from_secs(10));
        assert_idle(&q).await;
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_fires_on_time_and_earlier_deadline_wins() {
        let q = queue();
        let start = Instant::now();
        q.add_after("a", Added, Duration::from_secs(10));
        q.add_after("a", Changed, Duration::from_secs(20));
        assert_eq!((q.len(), q.delayed()), (0, 1));
        let waiter = spawn_next(&q);
        sleep(Duration::from_secs(1)).await;
        q.add_after("a", Deleted, Duration::from_secs(3));
        let item = within(waiter).await.unwrap().unwrap();
        assert_eq!(start.elapsed(), Duration::from_secs(4));
        assert_eq!(
            (item.reason, item.queued_for, q.delayed()),
            (Deleted, Duration::ZERO, 0)
        );
        q.done(&"a");

        // Fires without any waiter; a delayed add landing on a dirty key is a no-op.
        q.add("a", Added);
        q.add_after("a", Changed, Duration::from_secs(1));
        q.add_after("b", Changed, Duration::from_secs(1));
        q.add_after("c", Changed, Duration::ZERO);
        sleep(Duration::from_secs(2)).await;
        assert_eq!((q.len(), q.delayed()), (3, 0));
        let a = take(&q).await;
        assert_eq!(
            (a.key, a.reason, a.queued_for),
            ("a", Added, Duration::from_secs(2))
        );
        assert_eq!(take(&q).await.key, "c");
        let b = take(&q).await;
        assert_eq!((b.key, b.queued_for), ("b", Duration::from_secs(1)));
        assert_idle(&q).await;
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_doubles_caps_and_forget_resets() {
        let config = QueueConfig {
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(40),
            ..QueueConfig::default()
        };
        let q = WorkQueue::<&str>::new(config, Lanes::new(2));
        let delays: Vec<_> = (0..6)
            .map(|_| q.add_rate_limited("a", ()).as_millis())
            .collect();
        assert_eq!(delays, [5, 10, 20, 40, 40, 40]);
        assert_eq!(q.num_requeues(&"a"), 6);
        q.forget(&"a");
        assert_eq!(q.num_requeues(&"a"), 0);
        assert_eq!(q.add_rate_limited("a", ()), Duration::from_millis(5));

        let q = WorkQueue::<u32>::new(QueueConfig::default(), Lanes::new(2));
        let last = (0..100).map(|_| q.add_rate_limited(7, ())).last();
        assert_eq!(last, Some(Duration::from_secs(1000)));
        assert_eq!((q.delayed(), q.stats().retries_total), (1, 100));
        assert_eq!(within(q.next()).await.unwrap().queued_for, Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_share_one_bucket_of_ten_per_second_after_a_burst_of_a_hundred() {
        let q = WorkQueue::<u32>::new(QueueConfig::default(), Lanes::new(2));
        let delays: Vec<_> = (0..120).map(|key| q.add_rate_limited(key, ())).collect();
        // Each key's first failure waits 5 ms, until the burst of 100 is spent; then one retry
        // every 100 ms.
        assert!(delays[..100].iter().all(|d| *d == Duration::from_millis(5)));
        assert_eq!(delays[100], Duration::from_millis(100));
        assert_eq!(delays[119], Duration::from_secs(2));
        // The bucket refills with time.
        sleep(Duration::from_secs(60)).await;
        assert_eq!(q.add_rate_limited(500, ()), Duration::from_millis(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_is_handed_out_before_keys_of_an_initial_list_or_a_resync() {
        let q = queue();
        for key in ["l1", "l2", "l3"] {
            q.add_low(key, Added);
        }
        q.add("change", Changed);
        // A key queued low and then changed moves up, once.
        q.add("l3", Changed);
        let order: Vec<_> = [
            take(&q).await,
            take(&q).await,
            take(&q).await,
            take(&q).await,
        ]
        .map(|item| (item.key, item.reason))
        .into();
        assert_eq!(
            order,
            [
                ("change", Changed),
                ("l3", Added),
                ("l1", Added),
                ("l2", Added)
            ]
        );
        assert_eq!(q.len(), 0);
        assert_idle(&q).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_backlog_ramps_up_on_one_cpu_and_starts_slow_again_after_idle() {
        let q = Arc::new(WorkQueue::new(QueueConfig::default(), Lanes::new(1)));
        for key in ["l1", "l2", "l3", "l4", "l5", "l6"] {
            q.add_low(key, Added);
        }
        assert_eq!(take(&q).await.key, "l1");
        assert_idle(&q).await;
        // Each key that ends lets one more in, though none is left in flight between.
        q.done(&"l1");
        assert_eq!([take(&q).await.key, take(&q).await.key], ["l2", "l3"]);
        assert_idle(&q).await;
        q.done(&"l2");
        q.done(&"l3");
        let more = [take(&q).await.key, take(&q).await.key, take(&q).await.key];
        assert_eq!(more, ["l4", "l5", "l6"]);
        more.iter().for_each(|key| q.done(key));
        // Idle, then a new backlog: one at a time again.
        q.add_low("l7", Added);
        q.add_low("l8", Added);
        assert_eq!(take(&q).await.key, "l7");
        assert_idle(&q).await;
    }

    #[tokio::test(start_paused = true)]
    async fn retries_and_requeues_keep_the_lane_their_key_was_handed_out_from() {
        let q = queue();
        q.add_low("l1", Added);
        q.add_low("l2", Added);
        q.add("c1", Changed);
        assert_eq!([take(&q).await.key, take(&q).await.key], ["c1", "l1"]);
        // A backlog key that failed, a change requeued for later.
        q.add_rate_limited("l1", Added);
        q.add_after("c1", Changed, Duration::from_secs(1));
        q.done(&"l1");
        q.done(&"c1");
        sleep(Duration::from_secs(2)).await;
        let order = [take(&q).await.key, take(&q).await.key, take(&q).await.key];
        assert_eq!(order, ["c1", "l2", "l1"]);
        order.iter().for_each(|key| q.done(key));
        // A key not in flight is delayed into the front lane, and of two delayed adds of one
        // key, the earlier deadline and the front lane win.
        q.add_low("l3", Added);
        assert_eq!(take(&q).await.key, "l3");
        q.add_after("l3", Added, Duration::from_secs(1));
        q.done(&"l3");
        q.add_after("l3", Changed, Duration::from_secs(2));
        q.add_low("l4", Added);
        sleep(Duration::from_secs(3)).await;
        let order = [take(&q).await, take(&q).await].map(|item| (item.key, item.reason));
        assert_eq!(order, [("l3", Added), ("l4", Added)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_a_reconcile_made_itself_keeps_its_lane_while_it_is_in_flight() {
        let q = queue();
        q.add_low("l1", Added);
        q.add_low("l2", Added);
        q.add("c1", Changed);
        assert_eq!([take(&q).await.key, take(&q).await.key], ["c1", "l1"]);
        // The watch shows what each applied, while each is in flight.
        q.add_own("l1", Changed);
        q.add_own("c1", Changed);
        q.done(&"l1");
        q.done(&"c1");
        let order = [take(&q).await.key, take(&q).await.key, take(&q).await.key];
        assert_eq!(order, ["c1", "l2", "l1"]);
        order.iter().for_each(|key| q.done(key));
        // Not in flight, it is a change; a real change of a key in flight still is one.
        q.add_low("l3", Added);
        q.add_low("l4", Added);
        q.add_own("l4", Changed);
        assert_eq!(take(&q).await.key, "l4");
        q.done(&"l4");
        assert_eq!(take(&q).await.key, "l3");
        q.add_low("l5", Added);
        q.add_own("l3", Changed);
        q.add("l3", Changed);
        q.done(&"l3");
        assert_eq!(take(&q).await.key, "l3");
    }

    #[tokio::test(start_paused = true)]
    async fn while_a_change_waits_or_runs_the_low_lanes_keep_no_more_keys_in_flight_than_the_cpus_it_leaves()
     {
        let lanes = Lanes::new(3);
        let (a, b) = (sharing(&lanes), sharing(&lanes));
        for key in ["a1", "a2", "a3", "a4"] {
            a.add_low(key, Added);
        }
        for key in ["b1", "b2"] {
            b.add_low(key, Added);
        }
        // No change anywhere: the low lanes are not held back.
        assert_eq!([take(&a).await.key, take(&a).await.key], ["a1", "a2"]);
        assert_eq!(take(&b).await.key, "b1");
        // A change ready in b leaves 2 of the 3 CPUs to low-lane keys, and 3 are in flight.
        b.add("change", Changed);
        assert_idle(&a).await;
        a.done(&"a1");
        a.done(&"a2");
        assert_eq!(take(&a).await.key, "a3");
        assert_idle(&a).await;
        // It stays urgent while in flight; a waiting worker takes a key once room is freed.
        assert_eq!(take(&b).await.key, "change");
        let waiting = spawn_next(&a);
        sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished());
        b.done(&"b1");
        assert_eq!(within(waiting).await.unwrap().unwrap().key, "a4");
        assert_idle(&b).await;
        // Once the change is done, the low lanes run free again.
        b.done(&"change");
        assert_eq!(take(&b).await.key, "b2");
    }

    #[tokio::test(start_paused = true)]
    async fn the_backlog_always_moves_and_a_queue_counts_only_while_served_and_alive() {
        let lanes = Lanes::new(2);
        let a = sharing(&lanes);
        let unserved = Arc::new(WorkQueue::new(QueueConfig::default(), lanes.clone()));
        unserved.add("change-1", Changed);
        unserved.add("change-2", Changed);
        a.add_low("a1", Added);
        a.add_low("a2", Added);
        // Changes in a queue nobody works on hold nothing back.
        assert_eq!([take(&a).await.key, take(&a).await.key], ["a1", "a2"]);
        let b = sharing(&lanes);
        b.add("change-1", Changed);
        b.add("change-2", Changed);
        b.add_low("b1", Added);
        a.done(&"a1");
        a.done(&"a2");
        a.add_low("a3", Added);
        // Even with no CPU left beside the changes, one low-lane key runs at a time.
        assert_eq!(take(&a).await.key, "a3");
        assert_eq!(take(&b).await.key, "change-1");
        assert_eq!(take(&b).await.key, "change-2");
        assert_idle(&b).await;
        a.add_low("a4", Added);
        assert_idle(&a).await;
        // A queue dropped with its changes in flight takes them out of the counts...
        drop(b);
        assert_eq!(take(&a).await.key, "a4");
        a.done(&"a3");
        a.done(&"a4");
        // ... and its low-lane keys in flight.
        let c = sharing(&lanes);
        c.add_low("c1", Added);
        assert_eq!(take(&c).await.key, "c1");
        a.add("change", Changed);
        a.add_low("a5", Added);
        assert_eq!(take(&a).await.key, "change");
        assert_idle(&a).await;
        drop(c);
        assert_eq!(take(&a).await.key, "a5");
    }

    #[tokio::test(start_paused = true)]
    async fn a_backlog_starting_from_idle_takes_as_many_workers_as_cpus_then_one_more_per_key_done()
    {
        let lanes = Lanes::new(2);
        let (a, b) = (sharing(&lanes), sharing(&lanes));
        for key in ["a1", "a2", "a3", "a4", "a5"] {
            a.add_low(key, Added);
        }
        b.add_low("b1", Added);
        b.add_low("b2", Added);
        // As many as the host has CPUs, across the queues.
        assert_eq!(take(&a).await.key, "a1");
        assert_eq!(take(&b).await.key, "b1");
        assert_idle(&a).await;
        assert_idle(&b).await;
        // Each key done lets two more in: the one in its place and one beside it.
        a.done(&"a1");
        assert_eq!(take(&a).await.key, "a2");
        assert_eq!(take(&b).await.key, "b2");
        assert_idle(&a).await;
        b.done(&"b1");
        assert_eq!([take(&a).await.key, take(&a).await.key], ["a3", "a4"]);
        assert_idle(&a).await;
        // Every key done but one still waiting: the backlog goes on, no slower.
        for key in ["a2", "a3", "a4"] {
            a.done(&key);
        }
        b.done(&"b2");
        assert_eq!(take(&a).await.key, "a5");
        a.done(&"a5");
        // Idle, the low lanes start over from as many keys as CPUs.
        for key in ["a6", "a7", "a8"] {
            a.add_low(key, Added);
        }
        assert_eq!([take(&a).await.key, take(&a).await.key], ["a6", "a7"]);
        assert_idle(&a).await;
    }

    #[tokio::test(start_paused = true)]
    async fn room_for_two_goes_to_the_first_two_in_line_whichever_wakes_first() {
        let lanes = Lanes::new(2);
        let (c, x, y) = (sharing(&lanes), sharing(&lanes), sharing(&lanes));
        c.add_low("c1", Added);
        c.add_low("c2", Added);
        assert_eq!([take(&c).await.key, take(&c).await.key], ["c1", "c2"]);
        x.add_low("x1", Added);
        let x_waiting = spawn_next(&x);
        sleep(Duration::from_secs(1)).await;
        y.add_low("y1", Added);
        let y_waiting = spawn_next(&y);
        sleep(Duration::from_secs(1)).await;
        // x's worker wakes and waits again, now behind y's for the room, though first in line.
        x.add_low("x2", Added);
        sleep(Duration::from_secs(1)).await;
        assert!(!x_waiting.is_finished() && !y_waiting.is_finished());
        // One key done: room for one in its place and one more.
        c.done(&"c1");
        let served = timeout(Duration::from_millis(1), async {
            (x_waiting.await.unwrap(), y_waiting.await.unwrap())
        });
        let (x_item, y_item) = served.await.expect("both served at once");
        assert_eq!((x_item.unwrap().key, y_item.unwrap().key), ("x1", "y1"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_worker_waiting_for_room_takes_a_delayed_key_when_it_is_due() {
        let lanes = Lanes::new(2);
        let (a, b) = (sharing(&lanes), sharing(&lanes));
        b.add("change", Changed);
        assert_eq!(take(&b).await.key, "change");
        a.add_low("a1", Added);
        a.add_low("a2", Added);
        assert_eq!(take(&a).await.key, "a1");
        a.add_after("retry", Changed, Duration::from_secs(5));
        let waiting = spawn_next(&a);
        sleep(Duration::from_secs(4)).await;
        assert!(!waiting.is_finished());
        let due = within(waiting).await.unwrap().unwrap();
        // Handed out the moment it was due.
        assert_eq!((due.key, due.queued_for), ("retry", Duration::ZERO));
    }

    #[tokio::test(start_paused = true)]
    async fn a_worker_waiting_for_room_takes_its_backlog_key_once_it_changes() {
        let lanes = Lanes::new(1);
        let (a, b) = (sharing(&lanes), sharing(&lanes));
        b.add("change", Changed);
        assert_eq!(take(&b).await.key, "change");
        a.add_low("a1", Added);
        a.add_low("a2", Added);
        assert_eq!(take(&a).await.key, "a1");
        let waiting = spawn_next(&a);
        sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished());
        // Changed, a2 is urgent itself: the waiting worker takes it at once.
        a.add("a2", Changed);
        let changed = timeout(Duration::from_millis(1), waiting).await;
        assert_eq!(changed.expect("woken").unwrap().unwrap().key, "a2");
    }

    #[tokio::test(start_paused = true)]
    async fn the_room_beside_a_change_goes_to_the_queues_in_the_order_they_waited_for_it() {
        let lanes = Lanes::new(1);
        let (a, b, c) = (sharing(&lanes), sharing(&lanes), sharing(&lanes));
        c.add("change", Changed);
        assert_eq!(take(&c).await.key, "change");
        for key in ["a1", "a2", "a3"] {
            a.add_low(key, Added);
        }
        b.add_low("b1", Added);
        assert_eq!(take(&a).await.key, "a1");
        let b_waiting = spawn_next(&b);
        sleep(Duration::from_secs(1)).await;
        assert!(!b_waiting.is_finished());
        // a's worker comes back for more as soon as it is done, ahead of b's waiting one.
        a.done(&"a1");
        assert!(
            a.next().now_or_never().is_none(),
            "a took the room b waited for"
        );
        let served = timeout(Duration::from_millis(1), b_waiting).await;
        assert_eq!(served.expect("b served").unwrap().unwrap().key, "b1");
        let a_waiting = spawn_next(&a);
        sleep(Duration::from_secs(1)).await;
        assert!(!a_waiting.is_finished());
        b.done(&"b1");
        assert_eq!(within(a_waiting).await.unwrap().unwrap().key, "a2");
    }

    #[tokio::test(start_paused = true)]
    async fn a_queue_shut_down_holds_no_backlog_back_with_changes_it_will_never_hand_out() {
        let lanes = Lanes::new(2);
        let (a, b) = (sharing(&lanes), sharing(&lanes));
        b.add("change", Changed);
        a.add_low("a1", Added);
        a.add_low("a2", Added);
        assert_eq!(take(&a).await.key, "a1");
        assert_idle(&a).await;
        let waiting = spawn_next(&a);
        sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished());
        b.shut_down();
        assert_eq!(within(waiting).await.unwrap().unwrap().key, "a2");
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_wakes_waiters_and_drops_keys() {
        let q = queue();
        q.add_after("x", Added, Duration::from_secs(60));
        let waiters: Vec<_> = (0..3).map(|_| spawn_next(&q)).collect();
        sleep(Duration::from_secs(1)).await;
        let shut_at = Instant::now();
        q.shut_down();
        for waiter in waiters {
            assert!(within(waiter).await.unwrap().is_none());
        }
        assert_eq!(
            Instant::now(),
            shut_at,
            "woken by shutdown, not by the timer"
        );

        let q = queue();
        q.add("a", Added);
        q.add("b", Added);
        take(&q).await;
        q.add("a", Changed);
        q.shut_down();
        q.add("c", Added);
        q.add_after("d", Added, Duration::from_secs(1));
        assert_eq!((q.len(), q.delayed(), q.in_flight()), (0, 0, 1));
        assert!(within(q.next()).await.is_none());
        q.done(&"a");
        assert_eq!((q.len(), q.in_flight()), (0, 0));
        assert!(within(q.next()).await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_and_drain_waits_for_in_flight() {
        let q = queue();
        q.add("a", Added);
        q.add("b", Added);
        take(&q).await;
        let drain = tokio::spawn({
            let q = q.clone();
            async move { q.shut_down_and_drain().await }
        });
        sleep(Duration::from_secs(5)).await;
        assert!(!drain.is_finished());
        assert!(within(q.next()).await.is_none());
        q.done(&"a");
        timeout(Duration::from_millis(1), drain)
            .await
            .unwrap()
            .unwrap();
        within(queue().shut_down_and_drain()).await;
    }

    #[tokio::test(start_paused = true)]
    async fn stats_snapshot() {
        let q = queue();
        q.add("a", Added);
        q.add("a", Changed);
        q.add("b", Added);
        q.add_rate_limited("c", Added);
        sleep(Duration::from_secs(1)).await;
        let expected = QueueStats {
            depth: 3,
            adds_total: 4,
            retries_total: 1,
            ..QueueStats::default()
        };
        assert_eq!(q.stats(), expected);
        assert_eq!(take(&q).await.queued_for, Duration::from_secs(1));
        sleep(Duration::from_secs(2)).await;
        assert_eq!(take(&q).await.queued_for, Duration::from_secs(3));
        sleep(Duration::from_secs(1)).await;
        let stats = QueueStats {
            depth: 1,
            unfinished_work_seconds: 4.0,
            longest_running_processor_seconds: 3.0,
            ..expected
        };
        assert_eq!(q.stats(), stats);
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_and_processing_are_timed() {
        let q = queue();
        q.add("a", Added);
        q.add_after("b", Added, Duration::from_secs(5));
        sleep(Duration::from_secs(2)).await;
        take(&q).await;
        sleep(Duration::from_secs(4)).await;
        take(&q).await;
        q.done(&"a");
        q.done(&"a");
        q.done(&"b");
        let waited = q.queue_duration().snapshot();
        // a waited 2 s; b 1 s since its delayed add became due.
        assert_eq!((waited.count(), waited.sum), (2, 3.0));
        let worked = q.work_duration().snapshot();
        // a was in flight 4 s, b not at all; a's second done counts nothing.
        assert_eq!((worked.count(), worked.sum), (2, 4.0));
        assert_eq!(worked.cumulative[0], 1);
    }

    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn stress_exclusive_and_last_add_processed() {
        const KEYS: u64 = 40;
        // A bucket that never binds: the test is about exclusivity, not the retry rate.
        let config = QueueConfig {
            base_delay: Duration::from_micros(100),
            max_delay: Duration::from_millis(2),
            qps: u32::MAX,
            burst: u32::MAX,
        };
        let q = Arc::new(WorkQueue::<u64, u64>::new(config, Lanes::new(2)));
        // Generation of the latest immediate add per key, and the generation seen at hand-out.
        let gens = Arc::new(Mutex::new(HashMap::<u64, u64>::new()));
        let seen = Arc::new(Mutex::new(HashMap::<u64, u64>::new()));
        let running = Arc::new(Mutex::new(HashSet::<u64>::new()));

        let workers: Vec<_> = (0..8u64)
            .map(|w| {
                let (q, gens, seen, running) =
                    (q.clone(), gens.clone(), seen.clone(), running.clone());
                tokio::spawn(async move {
                    let mut rng = w + 1;
                    while let Some(Item { key, reason, .. }) = q.next().await {
                        assert!(
                            running.lock().unwrap().insert(key),
                            "{key} handed out twice"
                        );
                        let generation = gens.lock().unwrap().get(&key).copied().unwrap_or(0);
                        assert!(reason <= generation);
                        seen.lock()
                            .unwrap()
                            .entry(key)
                            .and_modify(|seen| *seen = (*seen).max(generation))
                            .or_insert(generation);
                        if xorshift(&mut rng).is_multiple_of(4) {
                            tokio::task::yield_now().await;
                        }
                        if xorshift(&mut rng).is_multiple_of(5) {
                            q.add_rate_limited(key, reason);
                        } else {
                            q.forget(&key);
                        }
                        running.lock().unwrap().remove(&key);
                        q.done(&key);
                    }
                })
            })
            .collect();

        let producers: Vec<_> = (0..4u64)
            .map(|p| {
                let (q, gens) = (q.clone(), gens.clone());
                tokio::spawn(async move {
                    let mut rng = p * 7919 + 17;
                    for i in 0..3000 {
                        let key = xorshift(&mut rng) % KEYS;
                        if i % 7 == 0 {
                            q.add_after(key, 0, Duration::from_micros(xorshift(&mut rng) % 500));
                        } else {
                            let mut gens = gens.lock().unwrap();
                            let generation = gens.entry(key).or_default();
                            *generation += 1;
                            q.add(key, *generation);
                        }
                        if i % 16 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                })
            })
            .collect();
        for producer in producers {
            producer.await.unwrap();
        }

        let caught_up = async {
            while *seen.lock().unwrap() != *gens.lock().unwrap() {
                sleep(Duration::from_millis(1)).await;
            }
        };
        timeout(Duration::from_secs(10), caught_up)
            .await
            .expect("every last add processed");
        let stop = async {
            q.shut_down_and_drain().await;
            for worker in workers {
                worker.await.unwrap();
            }
        };
        timeout(Duration::from_secs(10), stop)
            .await
            .expect("workers stop");
        assert!(q.stats().adds_total >= 4 * 3000 * 6 / 7);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn stress_queues_sharing_one_cpu_of_lanes_never_stall() {
        const KEYS: u64 = 30;
        let lanes = Lanes::new(1);
        let queues: Vec<Arc<WorkQueue<u64, u64>>> = (0..4)
            .map(|_| {
                let q = Arc::new(WorkQueue::new(QueueConfig::default(), lanes.clone()));
                q.serve();
                q
            })
            .collect();
        // Per queue and key: the latest generation added, and the latest seen at a hand-out.
        let gens = Arc::new(Mutex::new(HashMap::<(usize, u64), u64>::new()));
        let seen = Arc::new(Mutex::new(HashMap::<(usize, u64), u64>::new()));
        let mut workers = Vec::new();
        for (index, q) in queues.iter().enumerate() {
            for w in 0..3u64 {
                let (q, gens, seen) = (q.clone(), gens.clone(), seen.clone());
                workers.push(tokio::spawn(async move {
                    let mut rng = w + 1 + 10 * index as u64;
                    while let Some(Item { key, .. }) = q.next().await {
                        {
                            let generation = gens.lock().unwrap()[&(index, key)];
                            let mut seen = seen.lock().unwrap();
                            let last = seen.entry((index, key)).or_default();
                            *last = (*last).max(generation);
                        }
                        if xorshift(&mut rng).is_multiple_of(3) {
                            tokio::task::yield_now().await;
                        }
                        q.done(&key);
                    }
                }));
            }
        }
        let producers: Vec<_> = queues
            .iter()
            .enumerate()
            .map(|(index, q)| {
                let (q, gens) = (q.clone(), gens.clone());
                tokio::spawn(async move {
                    let mut rng = index as u64 * 7919 + 17;
                    for i in 0..2000 {
                        let key = xorshift(&mut rng) % KEYS;
                        let change = xorshift(&mut rng).is_multiple_of(5);
                        {
                            let mut gens = gens.lock().unwrap();
                            let generation = gens.entry((index, key)).or_default();
                            *generation += 1;
                            // Mostly backlog, a change now and then: the lanes bind most of
                            // the time.
                            if change {
                                q.add(key, *generation);
                            } else {
                                q.add_low(key, *generation);
                            }
                        }
                        if i % 8 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                })
            })
            .collect();
        for producer in producers {
            producer.await.unwrap();
        }
        let caught_up = async {
            while *seen.lock().unwrap() != *gens.lock().unwrap() {
                sleep(Duration::from_millis(1)).await;
            }
        };
        timeout(Duration::from_secs(10), caught_up)
            .await
            .expect("every queue's last add handed out");
        for q in &queues {
            q.shut_down_and_drain().await;
        }
        for worker in workers {
            timeout(Duration::from_secs(10), worker)
                .await
                .expect("workers stop")
                .unwrap();
        }
        let counts = lanes.counts();
        assert_eq!((counts.urgent, counts.backlog), (0, 0));
        assert!(counts.waiting.is_empty());
    }
}
