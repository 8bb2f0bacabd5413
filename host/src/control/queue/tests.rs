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
    served(lanes, 8)
}

/// A queue sharing `lanes`, served by `workers` workers.
fn served(lanes: &Arc<Lanes>, workers: usize) -> Queue {
    let q = Arc::new(WorkQueue::new(QueueConfig::default(), lanes.clone()));
    q.serve(workers);
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
async fn under_a_steady_stream_of_changes_the_low_lane_gets_one_hand_out_in_five() {
    let q = queue();
    for key in ["l1", "l2"] {
        q.add_low(key, Added);
    }
    let changes = ["c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9", "c10"];
    let mut order = Vec::new();
    for change in changes {
        q.add(change, Changed);
        let item = take(&q).await;
        q.done(&item.key);
        order.push(item.key);
    }
    assert_eq!(
        order,
        ["c1", "c2", "c3", "c4", "l1", "c5", "c6", "c7", "c8", "l2"]
    );
    // With the low lane empty, changes run back to back.
    assert_eq!(take(&q).await.key, "c9");
}

#[tokio::test(start_paused = true)]
async fn keys_waiting_for_their_own_queues_busy_workers_hold_no_other_backlog_back() {
    let lanes = Lanes::new(4);
    let (single, b) = (served(&lanes, 1), sharing(&lanes));
    single.add("running", Changed);
    assert_eq!(take(&single).await.key, "running");
    // Waiting for the one worker, busy: no worker could take them now.
    for key in ["waits-1", "waits-2", "waits-3"] {
        single.add(key, Changed);
    }
    for key in ["b1", "b2", "b3", "b4"] {
        b.add_low(key, Added);
    }
    // One CPU goes to the change in flight; the backlog has the three others.
    let taken = [take(&b).await.key, take(&b).await.key, take(&b).await.key];
    assert_eq!(taken, ["b1", "b2", "b3"]);
    assert_idle(&b).await;
    // Once the worker is free, the key it takes is urgent, and the one after it waits again.
    single.done(&"running");
    assert_eq!(take(&single).await.key, "waits-1");
    b.done(&"b1");
    assert_eq!(take(&b).await.key, "b4");
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
async fn a_backlog_starting_from_idle_takes_as_many_workers_as_cpus_then_one_more_per_key_done() {
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

/// A future that counts how often it is polled: each poll after the first is a wake-up.
struct Polls<F> {
    inner: std::pin::Pin<Box<F>>,
    polls: Arc<std::sync::atomic::AtomicUsize>,
}

impl<F: Future> Future for Polls<F> {
    type Output = F::Output;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        self.inner.as_mut().poll(cx)
    }
}

#[tokio::test(start_paused = true)]
async fn freed_room_wakes_only_the_first_queue_in_line() {
    // A change in flight leaves the backlog one of two CPUs.
    let lanes = Lanes::new(2);
    let (u, c, x, y) = (
        sharing(&lanes),
        sharing(&lanes),
        sharing(&lanes),
        sharing(&lanes),
    );
    u.add("u1", Changed);
    assert_eq!(take(&u).await.key, "u1");
    c.add_low("c1", Added);
    assert_eq!(take(&c).await.key, "c1");
    x.add_low("x1", Added);
    let x_waiting = spawn_next(&x);
    sleep(Duration::from_secs(1)).await;
    y.add_low("y1", Added);
    let polls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let y_next = {
        let y = y.clone();
        async move { y.next().await }
    };
    let y_waiting = tokio::spawn(Polls {
        inner: Box::pin(y_next),
        polls: polls.clone(),
    });
    sleep(Duration::from_secs(1)).await;
    let before = polls.load(Ordering::SeqCst);
    // The room c held goes to x, first in line; y's worker sleeps on.
    c.done(&"c1");
    assert_eq!(within(x_waiting).await.unwrap().unwrap().key, "x1");
    sleep(Duration::from_secs(1)).await;
    assert_eq!(polls.load(Ordering::SeqCst), before, "y's worker was woken");
    assert!(!y_waiting.is_finished());
    x.done(&"x1");
    assert_eq!(within(y_waiting).await.unwrap().unwrap().key, "y1");
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
            let (q, gens, seen, running) = (q.clone(), gens.clone(), seen.clone(), running.clone());
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
            q.serve(3);
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
