use super::*;

const BIG: usize = SMALL_BODY_BYTES + 1;
/// One large body's share at the tests' rate.
const SHARE: Duration = Duration::from_millis(400);

/// Real time: the large lane's threads are not tokio's, so a paused clock would jump to the
/// decision deadline while they work.
fn lanes(wait: Duration, large_rate: usize) -> Lanes {
    Lanes::new(LaneSettings {
        wait,
        large_rate,
        ..LaneSettings::default()
    })
}

fn rate() -> usize {
    (BIG as f64 / SHARE.as_secs_f64()) as usize
}

async fn decide(lanes: &Lanes, len: usize) -> Result<usize, StatusCode> {
    let body = Body::from(vec![b' '; len]);
    lanes
        .run(Some(len), body, lanes.deadline(), |b| b.len())
        .await
        .map_err(|r| r.status())
}

/// A large body is read at the lane's rate and holds the lane meanwhile; small ones never
/// wait on it.
#[tokio::test]
async fn large_bodies_share_a_byte_rate_and_small_ones_pass() {
    let lanes = lanes(Duration::from_millis(100), rate());
    let started = Instant::now();
    let (first, second, small) = tokio::join!(
        decide(&lanes, BIG),
        async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            decide(&lanes, BIG).await
        },
        async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            let asked = Instant::now();
            (decide(&lanes, 100).await, asked.elapsed())
        },
    );
    assert_eq!(first, Ok(BIG));
    assert!(started.elapsed() >= SHARE, "read at the rate");
    assert_eq!(
        second,
        Err(StatusCode::SERVICE_UNAVAILABLE),
        "a second large body within the first one's share waits past `wait`"
    );
    assert_eq!(small.0, Ok(100), "the small lane is free");
    assert!(small.1 < SHARE / 2, "and not slowed: {:?}", small.1);
    assert_eq!(
        decide(&lanes, BIG).await,
        Ok(BIG),
        "free again after its share"
    );
}

/// The share is counted from when the permit was taken, not from the request's arrival: a
/// body that waited for the lane still holds it for its own share afterwards.
#[tokio::test]
async fn a_body_that_waited_still_holds_the_lane_for_its_share() {
    let lanes = lanes(Duration::from_secs(5), rate());
    let started = Instant::now();
    let (a, b, c) = tokio::join!(decide(&lanes, BIG), decide(&lanes, BIG), async {
        // Arrives while the first holds the lane; the second is already waiting.
        tokio::time::sleep(Duration::from_millis(10)).await;
        decide(&lanes, BIG).await
    });
    assert_eq!((a, b, c), (Ok(BIG), Ok(BIG), Ok(BIG)));
    assert!(
        started.elapsed() >= SHARE * 2,
        "three bodies, one per share: the third decided after two shares, not {:?}",
        started.elapsed()
    );
}

/// The values the server runs with, as docs/design/admission.md gives them.
#[test]
fn the_defaults_are_the_documented_values() {
    let s = LaneSettings::default();
    assert_eq!((s.small, s.large), (8, 1));
    assert_eq!(s.wait, Duration::from_secs(2));
    assert_eq!(s.answer_within, Duration::from_secs(4));
    assert_eq!(s.large_rate, 4 * 1024 * 1024);
    assert_eq!(SMALL_BODY_BYTES, 128 * 1024);
    assert_eq!(s.inline, 8 * 1024);
}

/// A small body within `inline` is decided on the worker that read it, one over it on a
/// blocking thread; both need a small permit, so while the only one is held an inline body
/// waits for it like any other and is told to retry.
#[tokio::test]
async fn bodies_within_inline_are_decided_where_they_were_read() {
    let lanes = Lanes::new(LaneSettings {
        small: 1,
        wait: Duration::from_millis(50),
        ..LaneSettings::default()
    });
    let here = std::thread::current().id();
    let decided_on = |len: usize| {
        let body = Body::from(vec![b' '; len]);
        lanes.run(Some(len), body, lanes.deadline(), |_| {
            std::thread::current().id()
        })
    };
    assert_eq!(decided_on(INLINE_BODY_BYTES).await.ok(), Some(here));
    let elsewhere = decided_on(INLINE_BODY_BYTES + 1).await.ok();
    assert!(
        elsewhere.is_some_and(|thread| thread != here),
        "{elsewhere:?}"
    );
    let holder = INLINE_BODY_BYTES + 1;
    let (held, waited) = tokio::join!(
        lanes.run(
            Some(holder),
            Body::from(vec![b' '; holder]),
            lanes.deadline(),
            |_| {
                std::thread::sleep(Duration::from_millis(300));
            }
        ),
        async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            decided_on(2).await
        }
    );
    assert!(held.is_ok());
    let waited = waited.expect_err("no permit in time");
    assert_eq!(waited.status(), StatusCode::SERVICE_UNAVAILABLE);
}

/// The status, `Retry-After` and message of a 503.
async fn told_to_retry(answer: Result<(), Response>) -> String {
    let answer = answer.expect_err("a 503");
    assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.headers()[header::RETRY_AFTER], "1");
    let body = axum::body::to_bytes(answer.into_body(), 4096).await;
    let status: serde_json::Value = serde_json::from_slice(&body.expect("body")).expect("JSON");
    assert_eq!(status["reason"], "ServiceUnavailable");
    status["message"].as_str().unwrap_or_default().to_owned()
}

/// One budget from the request's arrival: a decision still running at the deadline is
/// answered 503 then, not when it ends, and keeps its permit until it ends; a request
/// waiting for that permit is answered 503 at its own deadline, before `wait`; and a body
/// whose reading took the budget is answered 503 rather than decided late.
#[tokio::test]
async fn past_the_budget_the_answer_is_503_with_retry_after() {
    let budget = Duration::from_millis(300);
    // Decided on a blocking thread (none inline), which the deadline can leave behind.
    let lanes = Lanes::new(LaneSettings {
        small: 1,
        wait: Duration::from_secs(2),
        answer_within: budget,
        inline: 0,
        ..LaneSettings::default()
    });
    let lanes = &lanes;
    let timed = |delay: u64, work: u64| async move {
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let asked = Instant::now();
        let answer = lanes.run(Some(2), Body::from("{}"), lanes.deadline(), move |_| {
            std::thread::sleep(Duration::from_millis(work));
        });
        (answer.await, asked.elapsed())
    };
    // Both would take 2 s without the budget: the decision, and the wait for its permit.
    let ((slow, slow_took), (waiting, waiting_took)) = tokio::join!(timed(0, 2000), timed(50, 0));
    for took in [slow_took, waiting_took] {
        assert!(took >= budget && took < budget * 4, "{took:?}");
    }
    assert_eq!(
        told_to_retry(slow).await,
        "admission webhook is saturated: the decision did not finish in time; retry"
    );
    assert_eq!(
        told_to_retry(waiting).await,
        "admission webhook is saturated: no admission capacity free in time; retry"
    );
    // The reading counts too: a body that took the whole budget to arrive is not decided (on
    // the worker that read it, as a body this small is).
    let lanes = Lanes::new(LaneSettings {
        answer_within: budget,
        ..LaneSettings::default()
    });
    let slow_body = Body::from_stream(futures::stream::once(async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        Ok::<_, std::io::Error>(Bytes::from("{}"))
    }));
    let late = lanes.run(Some(2), slow_body, lanes.deadline(), |_| {
        std::thread::sleep(Duration::from_millis(50));
    });
    assert_eq!(
        told_to_retry(late.await).await,
        "admission webhook is saturated: the decision did not finish in time; retry"
    );
}

#[tokio::test]
async fn without_a_rate_to_keep_the_large_lane_frees_at_once() {
    let lanes = lanes(Duration::from_millis(100), usize::MAX);
    for _ in 0..3 {
        assert_eq!(decide(&lanes, BIG).await, Ok(BIG));
    }
}

/// An answer given before the body was read in full closes the connection and says so; one
/// given after reading it keeps the connection.
#[tokio::test]
async fn an_answer_before_the_body_is_read_closes_the_connection() {
    let closes = |r: &Response| {
        r.headers()
            .get(header::CONNECTION)
            .is_some_and(|v| v == "close")
    };
    let lanes = lanes(Duration::from_millis(50), rate());
    let hold = |len: usize| {
        lanes.run(
            Some(len),
            Body::from(vec![b' '; len]),
            lanes.deadline(),
            |b| b.len(),
        )
    };
    // The large lane held: the second large body is refused unread.
    let (first, refused) = tokio::join!(hold(BIG), async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        hold(BIG).await
    });
    assert!(first.is_ok());
    let refused = refused.expect_err("busy");
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(closes(&refused));
    // Too large for the lane its declared size chose: not read in full either.
    let lied = lanes
        .run(
            Some(10),
            Body::from(vec![b' '; BIG]),
            lanes.deadline(),
            |b| b.len(),
        )
        .await
        .expect_err("too large");
    assert_eq!(lied.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(closes(&lied));
    // A small body read in full, then refused for want of a permit: the connection stays.
    let small = Lanes::new(LaneSettings {
        small: 1,
        wait: Duration::from_millis(50),
        inline: 0,
        ..LaneSettings::default()
    });
    let (_, busy) = tokio::join!(
        small.run(Some(2), Body::from("{}"), small.deadline(), |_| {
            std::thread::sleep(Duration::from_millis(300));
        }),
        async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            small
                .run(Some(2), Body::from("{}"), small.deadline(), |_| ())
                .await
        }
    );
    let busy = busy.expect_err("busy");
    assert_eq!(busy.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(!closes(&busy));
}
