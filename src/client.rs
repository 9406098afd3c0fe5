//! The Kubernetes client the operator runs with: its configuration, client-go's QPS/burst limit
//! as a token bucket in front of every request, and a read timeout on every request but watches
//! (kube sets none: a request to an API server that accepted the connection and then went
//! silent would wait forever).

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::Context as _;
use futures::future::BoxFuture;
use http_body_util::Either;
use hyper::http;
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio::time::{Instant, Sleep};
use tower::{BoxError, Layer, Service};
use tower_http::timeout::TimeoutBody;

/// The configuration from `kubeconfig`, else inferred (in-cluster, `KUBECONFIG`, ~/.kube/config).
pub async fn kube_config(kubeconfig: Option<&Path>) -> anyhow::Result<Config> {
    match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("--kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("--kubeconfig {}", path.display()))
        }
        None => Config::infer()
            .await
            .context("no Kubernetes configuration (in-cluster, KUBECONFIG or ~/.kube/config)"),
    }
}

/// The read timeout of tools' clients (`certs`), and the default of `KUBE_API_TIMEOUT`.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// A client whose requests wait for a token (`burst` at once, refilled at `qps` per second) and
/// whose non-watch requests fail once the API server has sent nothing for `read_timeout`.
pub fn limited_client(
    config: Config,
    qps: f64,
    burst: u32,
    read_timeout: Duration,
) -> anyhow::Result<Client> {
    let builder = ClientBuilder::try_from(config).context("building the Kubernetes client")?;
    Ok(builder
        .with_layer(&ReadTimeoutLayer(read_timeout))
        .with_layer(&TokenBucketLayer::new(qps, burst))
        .build())
}

/// A rate-limited client from `kubeconfig` or the inferred configuration.
pub async fn client(kubeconfig: Option<&Path>, qps: f64, burst: u32) -> anyhow::Result<Client> {
    limited_client(
        kube_config(kubeconfig).await?,
        qps,
        burst,
        DEFAULT_READ_TIMEOUT,
    )
}

/// Whether a request is a watch (`?watch=true`), which may rightly stay silent for minutes;
/// kube's watcher guards those with its own idle timeout.
fn is_watch(uri: &http::Uri) -> bool {
    uri.query().is_some_and(|q| {
        q.split('&')
            .any(|pair| matches!(pair, "watch=true" | "watch=1"))
    })
}

/// Fails a non-watch request when its response headers, or any next piece of its body, take
/// longer than the timeout: a socket read timeout that spares watches.
#[derive(Clone, Copy, Debug)]
pub struct ReadTimeoutLayer(pub Duration);

impl<S> Layer<S> for ReadTimeoutLayer {
    type Service = ReadTimeout<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ReadTimeout {
            inner,
            timeout: self.0,
        }
    }
}

#[derive(Clone, Debug)]
pub struct ReadTimeout<S> {
    inner: S,
    timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
#[error("the Kubernetes API server sent no response within {0:?}")]
pub struct NoResponse(Duration);

impl<S, Req, B> Service<http::Request<Req>> for ReadTimeout<S>
where
    S: Service<http::Request<Req>, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Either<TimeoutBody<B>, B>>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<Req>) -> Self::Future {
        let watch = is_watch(request.uri());
        let timeout = self.timeout;
        let response = self.inner.call(request);
        Box::pin(async move {
            if watch {
                return Ok(response.await.map_err(Into::into)?.map(Either::Right));
            }
            match tokio::time::timeout(timeout, response).await {
                Ok(response) => Ok(response
                    .map_err(Into::into)?
                    .map(|body| Either::Left(TimeoutBody::new(timeout, body)))),
                Err(_) => Err(NoResponse(timeout).into()),
            }
        })
    }
}

/// client-go's `flowcontrol` token bucket: up to `burst` tokens, refilled at `qps` per second;
/// a request takes one, or reserves the next and waits for it (so waiters are served in order).
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps,
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }

    /// Takes a token at `now`; returns how long to wait until it is really there.
    pub fn reserve(&self, now: Instant) -> Duration {
        let Ok(mut guard) = self.state.lock() else {
            return Duration::ZERO;
        };
        let (tokens, last) = &mut *guard;
        let elapsed = now.saturating_duration_since(*last).as_secs_f64();
        *tokens = (*tokens + elapsed * self.qps).min(self.burst) - 1.0;
        *last = now;
        if *tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-*tokens / self.qps)
        }
    }
}

#[derive(Clone, Debug)]
pub struct TokenBucketLayer(Arc<TokenBucket>);

impl TokenBucketLayer {
    pub fn new(qps: f64, burst: u32) -> Self {
        TokenBucketLayer(Arc::new(TokenBucket::new(qps, burst)))
    }
}

impl<S> Layer<S> for TokenBucketLayer {
    type Service = TokenBucketService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TokenBucketService {
            inner,
            bucket: self.0.clone(),
            reserved: false,
            wait: None,
        }
    }
}

/// Readiness waits for a token, then for the inner service. kube's client drives it from one
/// buffer worker, so requests leave in the order they were made.
pub struct TokenBucketService<S> {
    inner: S,
    bucket: Arc<TokenBucket>,
    reserved: bool,
    wait: Option<Pin<Box<Sleep>>>,
}

impl<S, R> Service<R> for TokenBucketService<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if !self.reserved {
            self.reserved = true;
            let wait = self.bucket.reserve(Instant::now());
            if !wait.is_zero() {
                self.wait = Some(Box::pin(tokio::time::sleep(wait)));
            }
        }
        if let Some(sleep) = self.wait.as_mut() {
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.wait = None;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.reserved = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_watches_are_spared() {
        let uri = |s: &str| s.parse::<http::Uri>().unwrap();
        assert!(is_watch(&uri("/api/v1/pods?watch=true&resourceVersion=1")));
        assert!(is_watch(&uri("/api/v1/pods?resourceVersion=1&watch=1")));
        assert!(!is_watch(&uri("/api/v1/pods?resourceVersion=1")));
        assert!(!is_watch(&uri("/api/v1/pods?watch=false")));
        assert!(!is_watch(&uri(
            "/apis/coordination.k8s.io/v1/namespaces/a/leases/watch"
        )));
        assert!(!is_watch(&uri("/api/v1/pods")));
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_server_fails_a_request_but_not_a_watch() {
        use tower::ServiceExt;
        let silent = tower::service_fn(|_: http::Request<()>| {
            std::future::pending::<Result<http::Response<String>, BoxError>>()
        });
        let mut svc = ReadTimeoutLayer(Duration::from_secs(3)).layer(silent);
        let get = http::Request::get("/api/v1/namespaces/a/leases/l")
            .body(())
            .unwrap();
        let t0 = Instant::now();
        let err = svc.ready().await.unwrap().call(get).await.err().unwrap();
        assert_eq!(Instant::now() - t0, Duration::from_secs(3));
        assert!(err.to_string().contains("no response within 3s"), "{err}");

        let watch = http::Request::get("/api/v1/pods?watch=true")
            .body(())
            .unwrap();
        let waited = tokio::time::timeout(
            Duration::from_secs(600),
            svc.ready().await.unwrap().call(watch),
        )
        .await;
        assert!(waited.is_err(), "a watch is not cut by the read timeout");
    }

    #[tokio::test(start_paused = true)]
    async fn burst_then_qps() {
        let bucket = TokenBucket::new(50.0, 100);
        let t0 = Instant::now();
        for _ in 0..100 {
            assert_eq!(bucket.reserve(t0), Duration::ZERO);
        }
        // The 101st waits one refill interval, the 150th 50 of them.
        assert_eq!(bucket.reserve(t0), Duration::from_millis(20));
        for _ in 0..48 {
            bucket.reserve(t0);
        }
        assert_eq!(bucket.reserve(t0), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn refills_up_to_burst_only() {
        let bucket = TokenBucket::new(10.0, 5);
        let t0 = Instant::now();
        for _ in 0..5 {
            bucket.reserve(t0);
        }
        let later = t0 + Duration::from_secs(60);
        for _ in 0..5 {
            assert_eq!(bucket.reserve(later), Duration::ZERO);
        }
        assert_eq!(bucket.reserve(later), Duration::from_millis(100));
    }

    #[tokio::test(start_paused = true)]
    async fn the_service_waits_for_its_token() {
        use tower::ServiceExt;
        let svc = tower::service_fn(|x: u32| async move { Ok::<_, std::convert::Infallible>(x) });
        let mut limited = TokenBucketLayer::new(2.0, 1).layer(svc);
        let t0 = Instant::now();
        assert_eq!(limited.ready().await.unwrap().call(1).await.unwrap(), 1);
        assert_eq!(limited.ready().await.unwrap().call(2).await.unwrap(), 2);
        assert_eq!(limited.ready().await.unwrap().call(3).await.unwrap(), 3);
        assert_eq!(
            Instant::now() - t0,
            Duration::from_secs(1),
            "two waits of 500ms"
        );
    }
}
