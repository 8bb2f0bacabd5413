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
//! key is ready, so a real change is reconciled before a backlog of them, except that under a
//! steady stream of changes one hand-out in five goes to the backlog, so it never starves; a low
//! key added again normally moves to the front lane, while a key requeued or retried from a
//! reconcile, or added again for a change the reconcile made itself, keeps the lane it was
//! handed out from. Like client-go's, the queue times how long keys wait and how long they are
//! processed.
//!
//! The queues of one host share their [`Lanes`]: while a key of a front lane runs in any of them,
//! or waits with a worker of its queue free to take it, the low lanes together keep no more keys
//! in flight than the CPUs the front lanes leave (one at least), so a change is not reconciled
//! among a crowd of backlog keys of other guests, such as the whole backlog a standby starts on
//! when it wins its Lease. A backlog that starts from idle starts slow, with as many keys in
//! flight across the queues as CPUs and one more each time one ends, so that a change arriving
//! as it starts finds a worker of its guest free, unless the guest has no more workers than the
//! host has CPUs.

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

/// Front-lane keys a queue hands out in a row while low-lane keys are ready; the next is a
/// low-lane key if the [`Lanes`] have room for it, so a backlog gets one hand-out in
/// `LOW_SHARE + 1` under a steady stream of changes.
const LOW_SHARE: u32 = 4;

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
/// lane in flight, or ready with a worker of its own free to take it (an urgent key), low-lane
/// keys are handed out only while fewer of them are in flight, across the queues, than the CPUs
/// the urgent keys leave, one at least: a change shares the CPUs with few backlog reconciles
/// however many workers the guests have, and the backlog always moves. With no urgent key, the
/// low lanes start from idle (no key in flight) with as many keys in flight as CPUs and take one
/// more each time one ends: a backlog reaches every worker within a few rounds of reconciles,
/// while a change arriving meanwhile finds a worker free. Room freed goes to the queues whose
/// workers waited for it, in the order they first did, so one queue's backlog never holds the
/// room while another's waits; freed room wakes only the workers of the first queue in line, so
/// a thousand queues waiting cost one wake-up per freed key, not a thousand.
#[derive(Debug)]
pub struct Lanes {
    cpus: usize,
    counts: Mutex<Counts>,
    /// The id of the next queue that shares these lanes.
    next_queue: AtomicU64,
}

#[derive(Debug, Default)]
struct Counts {
    /// Urgent keys of every served queue.
    urgent: usize,
    /// Low-lane keys in flight in every queue.
    backlog: usize,
    /// The queues with a worker waiting for room, in the order they were first refused it, each
    /// with what its waiting workers wait on: notified when the room may have grown while it is
    /// first in line, or when its turn comes.
    waiting: VecDeque<(u64, Arc<Notify>)>,
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
            next_queue: AtomicU64::new(0),
        })
    }

    /// Lanes for this process: as many CPUs as it may run on.
    pub fn of_host() -> Arc<Self> {
        Self::new(Self::host_cpus())
    }

    /// The CPUs this process may run on, as its affinity and cgroup quota allow.
    pub fn host_cpus() -> usize {
        std::thread::available_parallelism().map_or(1, NonZero::get)
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts one more low-lane key of `queue` in flight if there is room for it and it is
    /// `queue`'s turn; else, with `wait` (what the queue's workers wait on), puts `queue` in line
    /// for the room, if it is not yet.
    fn admit_low(&self, queue: u64, wait: Option<&Arc<Notify>>) -> bool {
        let mut counts = self.counts();
        let room = if counts.urgent > 0 {
            self.cpus.saturating_sub(counts.urgent).max(1)
        } else {
            counts.ramp
        };
        let turn = counts
            .waiting
            .front()
            .is_none_or(|(first, _)| *first == queue);
        if !turn || counts.backlog >= room {
            if let Some(wait) = wait
                && !counts.waiting.iter().any(|(waiting, _)| *waiting == queue)
            {
                counts.waiting.push_back((queue, wait.clone()));
            }
            return false;
        }
        counts.backlog += 1;
        let mut next = None;
        if counts
            .waiting
            .front()
            .is_some_and(|(first, _)| *first == queue)
        {
            counts.waiting.pop_front();
            // The next in line may have been refused its turn before this one came.
            next = first_in_line(&counts).filter(|_| counts.backlog < room);
        }
        drop(counts);
        if let Some(next) = next {
            next.notify_waiters();
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
        let Some(at) = counts
            .waiting
            .iter()
            .position(|(waiting, _)| *waiting == queue)
        else {
            return;
        };
        counts.waiting.remove(at);
        let next = first_in_line(&counts).filter(|_| at == 0);
        drop(counts);
        if let Some(next) = next {
            next.notify_waiters();
        }
    }

    /// Wakes the workers of the first queue in line, if any: the room may have grown.
    fn wake_first(&self, counts: std::sync::MutexGuard<'_, Counts>) {
        let first = first_in_line(&counts);
        drop(counts);
        if let Some(first) = first {
            first.notify_waiters();
        }
    }

    /// Counts `done` low-lane keys out of flight.
    fn release_low(&self, done: usize) {
        if done > 0 {
            let mut counts = self.counts();
            counts.backlog -= done;
            counts.ramp = counts.ramp.saturating_add(done);
            self.wake_first(counts);
        }
    }

    /// Replaces a queue's `from` urgent keys by `to`.
    fn recount_urgent(&self, from: usize, to: usize) {
        let mut counts = self.counts();
        counts.urgent = counts.urgent - from + to;
        if to < from {
            self.wake_first(counts);
        }
    }
}

/// What the workers of the first queue in line wait on.
fn first_in_line(counts: &Counts) -> Option<Arc<Notify>> {
    counts.waiting.front().map(|(_, room)| room.clone())
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
    /// What its workers blocked on the room in `lanes` wait on, as its place in their line.
    room: Arc<Notify>,
    /// Front keys handed out in a row while low-lane keys were ready.
    passed_by: u32,
    /// Workers waiting for room in `lanes`: only while one does is the queue in their line.
    blocked: usize,
    /// How many workers take keys, once they do: only then are urgent keys counted in `lanes`.
    workers: Option<usize>,
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

    /// Keys of the front lane in flight, and those ready that a free worker could take now,
    /// once the queue is served: keys waiting for this queue's busy workers hold no other
    /// queue's backlog back.
    fn urgent(&self) -> usize {
        self.workers.map_or(0, |workers| {
            let free = workers.saturating_sub(self.processing.len());
            self.running_front + self.ready_front.min(free)
        })
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
    /// room for it; after [`LOW_SHARE`] front keys in a row passed ready low-lane keys by, the
    /// low lane's first if `lanes` has room for it.
    fn pop(&mut self, now: Instant) -> Option<Item<K, R>> {
        if self.ready == 0 {
            return None;
        }
        let low_ready = self.ready > self.ready_front;
        let low = if self.ready_front == 0 {
            if !self.lanes.admit_low(self.id, Some(&self.room)) {
                return None;
            }
            true
        } else {
            low_ready && self.passed_by >= LOW_SHARE && self.lanes.admit_low(self.id, None)
        };
        self.passed_by = if low {
            0
        } else {
            self.passed_by.saturating_add(u32::from(low_ready))
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
    /// What the workers blocked on the lanes' room wait on (see [`Lanes`]).
    room: Arc<Notify>,
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
        let room = Arc::new(Notify::new());
        let state = State {
            high: VecDeque::new(),
            low: VecDeque::new(),
            ready: 0,
            ready_front: 0,
            dirty: HashMap::new(),
            processing: HashMap::new(),
            running_front: 0,
            id: lanes.next_queue.fetch_add(1, Ordering::Relaxed),
            room: room.clone(),
            lanes: lanes.clone(),
            passed_by: 0,
            blocked: 0,
            workers: None,
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
            room,
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
    /// when no key of the front lane is ready, or when its lane's share is due (see
    /// [`LOW_SHARE`]).
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

    /// Counts this queue's urgent keys in its [`Lanes`] from now on, for `workers` workers:
    /// call it once they take keys, or are about to, so that a queue nobody works on never
    /// holds the backlog of the others back.
    pub fn serve(&self, workers: usize) {
        self.with_state(|st, _| st.workers = Some(workers));
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
            let mut freed = pin!(self.room.notified());
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
mod tests;
