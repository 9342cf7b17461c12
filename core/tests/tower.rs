//! The `tower` layer (feature `tower`) in front of a real HTTP client
//! (hyper-util's) talking to a real HTTP server (hyper's) on 127.0.0.1
//! that fails on demand: `/ok` answers 200, `/fail` 503, `/missing` 404,
//! `/hang` never; every request it receives is counted.

#![allow(clippy::disallowed_types)] // std sync types in tests; the rule is for core's own code

use breakerbank::tower::BreakerLayer;
use breakerbank::{
    Bank, CallError, Dependency, ManualClock, Outcome, PartitionMetrics, Profile, State,
};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::service::service_fn as hyper_service_fn;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tower::{BoxError, Layer, Service, ServiceExt};

/// The test server: its address and how many requests reached it.
struct Server {
    addr: SocketAddr,
    hits: Arc<AtomicU64>,
}

impl Server {
    async fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicU64::new(0));
        let counted = hits.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let counted = counted.clone();
                tokio::spawn(async move {
                    let svc = hyper_service_fn(move |req: Request<Incoming>| {
                        counted.fetch_add(1, Ordering::SeqCst);
                        async move {
                            let status = match req.uri().path() {
                                "/ok" => StatusCode::OK,
                                "/missing" => StatusCode::NOT_FOUND,
                                "/hang" => std::future::pending().await,
                                _ => StatusCode::SERVICE_UNAVAILABLE,
                            };
                            let mut resp = Response::new(Full::new(Bytes::from_static(b"real")));
                            *resp.status_mut() = status;
                            Ok::<_, Infallible>(resp)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Server { addr, hits }
    }

    fn hits(&self) -> u64 {
        self.hits.load(Ordering::SeqCst)
    }
}

/// hyper-util's pooled client, its body read whole: `Response<Bytes>`.
fn http_client() -> impl Service<
    Request<Empty<Bytes>>,
    Response = Response<Bytes>,
    Error = BoxError,
    Future = impl std::future::Future<Output = Result<Response<Bytes>, BoxError>> + Send + 'static,
> + Clone {
    let client: Client<HttpConnector, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    client
        .map_err(BoxError::from)
        .and_then(|resp: Response<Incoming>| async move {
            let (parts, body) = resp.into_parts();
            let bytes = body.collect().await?.to_bytes();
            Ok::<_, BoxError>(Response::from_parts(parts, bytes))
        })
}

fn request(server: &Server, tenant: Option<&str>, path: &str) -> Request<Empty<Bytes>> {
    let mut b = Request::get(format!("http://{}{path}", server.addr));
    if let Some(t) = tenant {
        b = b.header("x-tenant", t);
    }
    b.body(Empty::new()).unwrap()
}

fn tenant_header(req: &Request<Empty<Bytes>>) -> Option<&str> {
    req.headers().get("x-tenant").and_then(|v| v.to_str().ok())
}

/// 5xx a failure, anything else a success.
fn server_errors(resp: &Response<Bytes>) -> Outcome {
    if resp.status().is_server_error() {
        Outcome::Failure
    } else {
        Outcome::Success
    }
}

fn profile(isolation: &str, fallback: &str) -> Profile {
    Profile::from_yaml(&format!(
        "dependencies:
  quotes_client:
    isolation: {isolation}
    trip: {{consecutive_failures: 3}}
    open_duration: 30s
    half_open: {{probe_budget: 1, success_threshold: 1}}
    fallback: {fallback}
    recovery_bound: 5m
"
    ))
    .unwrap()
}

fn metrics(bank: &Bank, partition: &str) -> PartitionMetrics {
    bank.metrics().dependencies[0]
        .partitions
        .iter()
        .find(|p| p.partition == partition)
        .unwrap_or_else(|| panic!("no partition {partition}"))
        .clone()
}

const ERROR_FALLBACK: &str = "{kind: error, code: QUOTES_DOWN}";

/// A bank of one dependency, `quotes_client`, and its handle.
fn quotes(isolation: &str, fallback: &str) -> (Bank, Dependency) {
    let bank = Bank::new(profile(isolation, fallback));
    let dep = bank.dependency("quotes_client").unwrap();
    (bank, dep)
}

/// The usual stack: the HTTP client behind `dep`'s breaker, 5xx counted
/// as failures, the tenant from the `x-tenant` header.
fn http_breaker(
    dep: &Dependency,
) -> impl Service<
    Request<Empty<Bytes>>,
    Response = Response<Bytes>,
    Error = CallError<BoxError>,
    Future = impl std::future::Future<Output = Result<Response<Bytes>, CallError<BoxError>>>
                 + Send
                 + 'static,
> + Clone {
    BreakerLayer::new(dep.clone())
        .tenant(tenant_header)
        .classify_response(server_errors)
        .layer(http_client())
}

/// Three `/fail` requests for `tenant`: enough to trip it.
async fn trip<S>(svc: &mut S, server: &Server, tenant: Option<&str>)
where
    S: Service<Request<Empty<Bytes>>, Response = Response<Bytes>>,
    S::Error: std::fmt::Debug,
{
    for _ in 0..3 {
        let resp = send(svc, request(server, tenant, "/fail")).await.unwrap();
        assert_eq!(
            resp.status(),
            StatusCode::SERVICE_UNAVAILABLE,
            "answered as is"
        );
    }
}

async fn send<S>(svc: &mut S, req: Request<Empty<Bytes>>) -> Result<Response<Bytes>, S::Error>
where
    S: Service<Request<Empty<Bytes>>, Response = Response<Bytes>>,
{
    svc.ready().await?.call(req).await
}

/// Requests to a port that was just free, where nothing listens: each
/// fails to connect.
async fn refused_connection() -> impl Fn() -> Request<Empty<Bytes>> {
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap()
    };
    move || {
        Request::get(format!("http://{closed}/ok"))
            .body(Empty::<Bytes>::new())
            .unwrap()
    }
}

#[tokio::test]
async fn c5_http_5xx_trips_and_open_refuses_without_reaching_the_server() {
    let server = Server::start().await;
    let (bank, dep) = quotes("global", ERROR_FALLBACK);
    let mut svc = http_breaker(&dep);
    trip(&mut svc, &server, None).await;
    assert_eq!(dep.state(None).unwrap(), State::Open);
    assert_eq!(server.hits(), 3);

    for _ in 0..5 {
        match send(&mut svc, request(&server, None, "/ok")).await {
            Err(CallError::Unavailable(u)) => {
                assert_eq!(u.dependency, "quotes_client");
                assert_eq!(u.partition, "global");
                assert_eq!(u.code.as_deref(), Some("QUOTES_DOWN"));
                assert!(u.retry_after.is_some());
            }
            other => panic!("open breaker answered {other:?}"),
        }
    }
    assert_eq!(
        server.hits(),
        3,
        "a refused request never reaches the server"
    );
    let m = metrics(&bank, "global");
    assert_eq!(m.failures_total, 3);
    assert_eq!(m.rejected_open_total, 5);
    assert_eq!(m.fallback_error_total, 5);
}

#[tokio::test]
async fn c17_4xx_classified_as_success_never_trips() {
    let server = Server::start().await;
    let (bank, dep) = quotes("global", ERROR_FALLBACK);
    let mut svc = http_breaker(&dep);
    for _ in 0..10 {
        let resp = send(&mut svc, request(&server, None, "/missing")).await;
        assert_eq!(resp.unwrap().status(), StatusCode::NOT_FOUND);
    }
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    assert_eq!(metrics(&bank, "global").failures_total, 0);
    assert_eq!(server.hits(), 10);
}

#[tokio::test]
async fn c17_without_a_response_classifier_every_response_is_a_success() {
    let server = Server::start().await;
    let (_bank, dep) = quotes("global", ERROR_FALLBACK);
    let mut svc = BreakerLayer::new(dep.clone()).layer(http_client());
    for _ in 0..5 {
        let resp = send(&mut svc, request(&server, None, "/fail")).await;
        assert_eq!(resp.unwrap().status(), StatusCode::SERVICE_UNAVAILABLE);
    }
    assert_eq!(dep.state(None).unwrap(), State::Closed);
}

#[tokio::test]
async fn c17_connection_errors_count_as_the_error_classifier_says() {
    let req = refused_connection().await;

    // Default: every error is a failure.
    let (_bank, dep) = quotes("global", ERROR_FALLBACK);
    let mut svc = http_breaker(&dep);
    for _ in 0..3 {
        let out = send(&mut svc, req()).await;
        assert!(matches!(out, Err(CallError::Inner(_))), "{out:?}");
    }
    assert_eq!(dep.state(None).unwrap(), State::Open);

    // Classified as cancelled: counts as neither (C10).
    let (bank, dep) = quotes("global", ERROR_FALLBACK);
    let mut svc = BreakerLayer::new(dep.clone())
        .classify_error(|_: &BoxError| Outcome::Cancelled)
        .layer(http_client());
    for _ in 0..5 {
        let out = send(&mut svc, req()).await;
        assert!(matches!(out, Err(CallError::Inner(_))), "{out:?}");
    }
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    let m = metrics(&bank, "global");
    assert_eq!((m.failures_total, m.cancelled_total), (0, 5));
}

#[tokio::test]
async fn c13_a_dropped_response_future_counts_cancelled_and_gives_its_probe_back() {
    let server = Server::start().await;
    let clock = ManualClock::new();
    let bank = Bank::with_clock(profile("global", ERROR_FALLBACK), clock.clone());
    let dep = bank.dependency("quotes_client").unwrap();
    let mut svc = http_breaker(&dep);
    trip(&mut svc, &server, None).await;
    clock.advance(Duration::from_secs(30));
    assert_eq!(dep.state(None).unwrap(), State::HalfOpen);

    // The one probe hangs at the server; the caller gives up on it.
    {
        let probe = send(&mut svc, request(&server, None, "/hang"));
        tokio::pin!(probe);
        let reached = async {
            while server.hits() < 4 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        };
        tokio::select! {
            out = &mut probe => panic!("the server never answers /hang: {out:?}"),
            () = reached => {}
        }
        assert_eq!(metrics(&bank, "global").cancelled_total, 0, "in flight");
    } // dropped here, unanswered
    assert_eq!(metrics(&bank, "global").cancelled_total, 1);

    // Its slot is free again: the next request is the probe, and closes.
    let resp = send(&mut svc, request(&server, None, "/ok")).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    assert_eq!(metrics(&bank, "global").probe_rejects_total, 0);
}

#[tokio::test]
async fn c9_tenants_trip_apart_over_http() {
    let server = Server::start().await;
    let (_bank, dep) = quotes("tenant", ERROR_FALLBACK);
    let mut svc = http_breaker(&dep);
    trip(&mut svc, &server, Some("acme")).await;
    assert_eq!(dep.state(Some("acme")).unwrap(), State::Open);
    assert_eq!(dep.state(Some("globex")).unwrap(), State::Closed);

    let before = server.hits();
    match send(&mut svc, request(&server, Some("acme"), "/ok")).await {
        Err(CallError::Unavailable(u)) => assert_eq!(u.partition, "acme"),
        other => panic!("acme's open breaker answered {other:?}"),
    }
    assert_eq!(server.hits(), before, "acme's refusal reached no server");
    for _ in 0..10 {
        let resp = send(&mut svc, request(&server, Some("globex"), "/ok")).await;
        assert_eq!(resp.unwrap().status(), StatusCode::OK);
    }
    assert_eq!(server.hits(), before + 10);
    assert_eq!(dep.state(Some("globex")).unwrap(), State::Closed);
}

#[tokio::test]
async fn c9_a_tenant_scoped_dependency_refuses_a_request_without_a_tenant() {
    let server = Server::start().await;
    let (_bank, dep) = quotes("tenant", ERROR_FALLBACK);
    let mut svc = http_breaker(&dep);
    let out = send(&mut svc, request(&server, None, "/ok")).await;
    assert!(matches!(out, Err(CallError::TenantRequired)), "{out:?}");
    assert_eq!(server.hits(), 0);
}

#[tokio::test]
async fn c3_an_open_degraded_dependency_answers_the_degraded_response() {
    let server = Server::start().await;
    let (bank, dep) = quotes("global", "{kind: degraded}");
    let mut svc = BreakerLayer::new(dep.clone())
        .classify_response(server_errors)
        .degraded(|req: &Request<Empty<Bytes>>| {
            // Only the quotes page has a degraded form.
            (req.uri().path() == "/ok").then(|| Response::new(Bytes::from_static(b"degraded")))
        })
        .layer(http_client());
    trip(&mut svc, &server, None).await;
    let resp = send(&mut svc, request(&server, None, "/ok")).await.unwrap();
    assert_eq!(resp.body().as_ref(), b"degraded");
    // C4: no degraded form is a fallback failure, never a success.
    let out = send(&mut svc, request(&server, None, "/missing")).await;
    assert!(
        matches!(out, Err(CallError::Unavailable(ref u)) if u.code.is_none()),
        "{out:?}"
    );
    assert_eq!(server.hits(), 3);
    let m = metrics(&bank, "global");
    assert_eq!(
        (m.fallback_degraded_total, m.fallback_failures_total),
        (1, 1)
    );
}

#[tokio::test]
async fn c1_clones_of_a_layered_service_share_one_breaker_across_tasks() {
    let server = Server::start().await;
    let (_bank, dep) = quotes("global", ERROR_FALLBACK);
    let svc = http_breaker(&dep);
    let tasks: Vec<_> = (0..3)
        .map(|_| {
            let mut svc = svc.clone();
            let req = request(&server, None, "/fail");
            tokio::spawn(async move { svc.ready().await?.call(req).await })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(dep.state(None).unwrap(), State::Open);
}

#[tokio::test]
async fn c17_the_layer_without_an_error_classifier_uses_the_dependencys() {
    let req = refused_connection().await;
    let (bank, dep) = quotes("global", ERROR_FALLBACK);
    // The dependency's default: a refused connection is not an outage.
    dep.set_classify(|e| e.downcast_ref::<BoxError>().map(|_| Outcome::Cancelled))
        .unwrap_or_else(|_| panic!("set once"));
    let mut svc = BreakerLayer::new(dep.clone()).layer(http_client());
    for _ in 0..5 {
        let out = send(&mut svc, req()).await;
        assert!(matches!(out, Err(CallError::Inner(_))), "{out:?}");
    }
    assert_eq!(dep.state(None).unwrap(), State::Closed);
    let m = metrics(&bank, "global");
    assert_eq!((m.failures_total, m.cancelled_total), (0, 5));
}

#[tokio::test]
async fn c10_a_response_future_dropped_after_slow_call_is_a_slow_failure() {
    let server = Server::start().await;
    let clock = ManualClock::new();
    let p = Profile::from_yaml(
        "dependencies:
  quotes_client:
    isolation: global
    trip: {consecutive_failures: 3, slow_call: 50ms}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: QUOTES_DOWN}
    recovery_bound: 5m
",
    )
    .unwrap();
    let bank = Bank::with_clock(p, clock.clone());
    let dep = bank.dependency("quotes_client").unwrap();
    let mut svc = http_breaker(&dep);
    for i in 1..=3 {
        let hung = send(&mut svc, request(&server, None, "/hang"));
        tokio::pin!(hung);
        let reached = async {
            while server.hits() < i {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        };
        tokio::select! {
            out = &mut hung => panic!("the server never answers /hang: {out:?}"),
            () = reached => {}
        }
        clock.advance(Duration::from_millis(60)); // the caller's timeout
    } // each dropped unanswered, after slow_call
    assert_eq!(dep.state(None).unwrap(), State::Open, "a hung server trips");
    let m = metrics(&bank, "global");
    assert_eq!((m.failures_total, m.cancelled_total), (3, 0));
    let refused = send(&mut svc, request(&server, None, "/ok")).await;
    assert!(matches!(refused, Err(CallError::Unavailable(_))));
    assert_eq!(server.hits(), 3, "open refuses without reaching the server");
}
