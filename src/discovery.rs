//! Whether an optional API (Multus', CDI's) is served, asked once when the leader starts.
//!
//! Only the API server's "not found" for the group/version, or a group/version served without
//! the resource, means absent: the leader then runs without it for its term. Anything else (a
//! timeout, a 5xx, a 403 while RBAC is being set up) is asked again, after 1 s, then doubling up
//! to 30 s, until [`GIVE_UP_AFTER`] has passed: then it is logged as an error and taken as
//! absent, so a flaky API server delays the leader's start by at most that, and a broken
//! discovery never blocks it for good. The classification and the schedule are pure
//! ([`classify`], [`next_wait`]); [`serves`] is the loop.

use std::time::{Duration, Instant};

use kube::Client;

const FIRST_WAIT: Duration = Duration::from_secs(1);
const MAX_WAIT: Duration = Duration::from_secs(30);
/// Asking stops once this much time has passed since the first question.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(60);

/// What one discovery answer says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    Served,
    Absent,
    /// No answer worth believing: ask again.
    Retry,
}

/// Classifies an answer: `Ok(listed)` when the group/version was served (`listed`: with the
/// resource), else the error.
pub fn classify(answer: Result<bool, &kube::Error>) -> Found {
    match answer {
        Ok(true) => Found::Served,
        Ok(false) => Found::Absent,
        Err(kube::Error::Api(s)) if s.code == 404 => Found::Absent,
        Err(_) => Found::Retry,
    }
}

/// The wait before asking again after `attempt` failed answers (1 s, 2 s, 4 s, ... 30 s), or
/// `None` when asking again would end past [`GIVE_UP_AFTER`] since the first question.
pub fn next_wait(attempt: u32, elapsed: Duration) -> Option<Duration> {
    let wait = FIRST_WAIT
        .saturating_mul(1u32 << attempt.min(16))
        .min(MAX_WAIT);
    (elapsed + wait <= GIVE_UP_AFTER).then_some(wait)
}

/// Whether the API server serves `group_version` `plural`.
pub async fn serves(client: &Client, group_version: &str, plural: &str) -> bool {
    let started = Instant::now();
    let mut attempt = 0;
    loop {
        let answer = client.list_api_group_resources(group_version).await;
        let listed = answer
            .as_ref()
            .map(|list| list.resources.iter().any(|r| r.name == plural));
        let error = answer.as_ref().err().map(ToString::to_string);
        match classify(listed) {
            Found::Served => return true,
            Found::Absent => {
                tracing::debug!(api = group_version, "API not served");
                return false;
            }
            Found::Retry => {}
        }
        let Some(wait) = next_wait(attempt, started.elapsed()) else {
            tracing::error!(
                api = group_version,
                error = error.unwrap_or_default(),
                after = ?started.elapsed(),
                "cannot tell whether the API is served; running without it until the operator restarts"
            );
            return false;
        };
        tracing::warn!(api = group_version, error = error.unwrap_or_default(), retry_in = ?wait, "API discovery failed; asking again");
        tokio::time::sleep(wait).await;
        attempt += 1;
    }
}

/// Whether the operator may list `plural` of `group_version` in every namespace: only a 403
/// says no (an optional read whose right an older RBAC lacks, e.g. KubeVirt's install resource on
/// a remote cluster), so a watch that would never fill is not started; any other answer is left
/// to the watch's retries.
pub async fn may_list(client: &Client, group_version: &str, plural: &str) -> bool {
    let (group, version) = group_version.split_once('/').unwrap_or(("", group_version));
    let ar = kube::api::ApiResource {
        group: group.to_owned(),
        version: version.to_owned(),
        api_version: group_version.to_owned(),
        kind: String::new(),
        plural: plural.to_owned(),
    };
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(client.clone(), &ar);
    let params = kube::api::ListParams::default().limit(1);
    match api.list_metadata(&params).await {
        Err(kube::Error::Api(s)) if s.code == 403 => {
            tracing::warn!(
                resource = %plural,
                group_version = %group_version,
                "the operator may not list it: {}",
                s.message
            );
            false
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(
            serde_json::from_value(serde_json::json!({
                "status": "Failure", "code": code, "message": "m", "reason": "r"}))
            .expect("status"),
        )
    }

    #[test]
    fn only_not_found_means_absent() {
        let cases = [
            (Ok(true), Found::Served, "served with the resource"),
            (Ok(false), Found::Absent, "served without the resource"),
            (
                Err(api_error(404)),
                Found::Absent,
                "group/version not served",
            ),
            (
                Err(api_error(403)),
                Found::Retry,
                "forbidden (RBAC not there yet)",
            ),
            (Err(api_error(500)), Found::Retry, "server error"),
            (
                Err(api_error(503)),
                Found::Retry,
                "aggregated API unavailable",
            ),
            (Err(api_error(429)), Found::Retry, "throttled"),
            (
                Err(kube::Error::Service(Box::new(std::io::Error::other(
                    "timed out",
                )))),
                Found::Retry,
                "no answer",
            ),
        ];
        for (answer, want, why) in cases {
            assert_eq!(classify(answer.as_ref().map(|b| *b)), want, "{why}");
        }
    }

    #[test]
    fn asks_again_with_backoff_then_gives_up() {
        let s = Duration::from_secs;
        let cases = [
            (0, s(0), Some(s(1))),
            (1, s(1), Some(s(2))),
            (4, s(15), Some(s(16))),
            (5, s(31), None),
            (5, s(20), Some(s(30))),
            (9, s(0), Some(s(30))),
            (40, s(0), Some(s(30))),
            (0, s(60), None),
        ];
        for (attempt, elapsed, want) in cases {
            assert_eq!(
                next_wait(attempt, elapsed),
                want,
                "attempt {attempt} at {elapsed:?}"
            );
        }
        // The whole schedule: 1+2+4+8+16 s, then one 30 s wait would pass the minute.
        let (mut elapsed, mut waits) = (Duration::ZERO, vec![]);
        while let Some(w) = next_wait(waits.len() as u32, elapsed) {
            elapsed += w;
            waits.push(w.as_secs());
        }
        assert_eq!(waits, [1, 2, 4, 8, 16]);
    }
}
