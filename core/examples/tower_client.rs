//! An HTTP client behind a breaker: hyper-util's client wrapped in
//! `BreakerLayer`, the tenant taken from a header, 5xx counted as
//! failures, talking to a local server whose tenant `acme` is failing.
//! acme's breaker trips and its requests are refused without reaching the
//! server, while `globex` is served throughout; once the server recovers,
//! acme's probe closes its breaker.
//!
//! `cargo run --release -p breakerbank --features tower --example tower_client`

#![allow(clippy::disallowed_types)] // std sync types in an example; the rule is for core's own code

use breakerbank::tower::BreakerLayer;
use breakerbank::{Bank, CallError, Outcome, Profile};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{Empty, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tower::{Layer, Service, ServiceExt};

const PROFILE: &str = r#"
dependencies:
  quotes_client:
    isolation: tenant
    trip: {consecutive_failures: 3}
    open_duration: 500ms
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: QUOTES_UNAVAILABLE}
    recovery_bound: 1m
"#;

/// A server that answers 503 to tenant acme while `acme_down` is set.
async fn serve(acme_down: Arc<AtomicBool>, hits: Arc<AtomicU64>) -> std::io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acme_down, hits) = (acme_down.clone(), hits.clone());
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                hits.fetch_add(1, Ordering::Relaxed);
                let acme = req.headers().get("x-tenant").is_some_and(|t| t == "acme");
                let status = if acme && acme_down.load(Ordering::Relaxed) {
                    StatusCode::SERVICE_UNAVAILABLE
                } else {
                    StatusCode::OK
                };
                let mut resp = Response::new(Full::new(Bytes::from_static(b"quote")));
                *resp.status_mut() = status;
                async move { Ok::<_, Infallible>(resp) }
            });
            tokio::spawn(async move {
                let conn = hyper::server::conn::http1::Builder::new();
                let _ = conn.serve_connection(TokioIo::new(stream), svc).await;
            });
        }
    });
    Ok(format!("http://{addr}/quote"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let acme_down = Arc::new(AtomicBool::new(true));
    let hits = Arc::new(AtomicU64::new(0));
    let url = serve(acme_down.clone(), hits.clone()).await?;

    let bank = Bank::new(Profile::from_yaml(PROFILE)?);
    let quotes = bank
        .dependency("quotes_client")
        .ok_or("quotes_client not declared")?;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut svc = BreakerLayer::new(quotes.clone())
        .tenant(|req: &Request<Empty<Bytes>>| {
            req.headers().get("x-tenant").and_then(|v| v.to_str().ok())
        })
        .classify_response(|resp: &Response<Incoming>| {
            if resp.status().is_server_error() {
                Outcome::Failure
            } else {
                Outcome::Success
            }
        })
        .layer(client);

    let mut get = async |tenant: &str| {
        let req = Request::get(&url)
            .header("x-tenant", tenant)
            .body(Empty::new())
            .expect("a valid request");
        let answer = match svc.ready().await?.call(req).await {
            Ok(resp) => format!("HTTP {}", resp.status()),
            Err(CallError::Unavailable(u)) => format!(
                "refused, {} (retry in {:?})",
                u.code.unwrap_or_default(),
                u.retry_after.unwrap_or_default()
            ),
            Err(e) => format!("error: {e}"),
        };
        Ok::<_, CallError<hyper_util::client::legacy::Error>>(answer)
    };

    for round in 1..=5 {
        let acme = get("acme").await?;
        let globex = get("globex").await?;
        println!("round {round}: acme {acme:<52} | globex {globex}");
    }
    println!(
        "acme is {}, globex is {}; the server saw {} requests for 10 sent",
        quotes.state(Some("acme"))?.as_str(),
        quotes.state(Some("globex"))?.as_str(),
        hits.load(Ordering::Relaxed),
    );

    acme_down.store(false, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(600)).await;
    println!("after the open period: acme {}", get("acme").await?);
    println!("acme is {}", quotes.state(Some("acme"))?.as_str());
    Ok(())
}
