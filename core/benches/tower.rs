//! The `tower` layer's cost per call over the bare service it wraps: a
//! `tower::service_fn` whose future is ready at once, called and polled
//! to completion, bare and behind `BreakerLayer` (closed breaker, success
//! recorded). The difference is the layer's overhead (target: ≤ 50 ns).
//!
//! `cargo bench -p breakerbank --features tower --bench tower`
//! (`make bench-tower`)

use breakerbank::tower::BreakerLayer;
use breakerbank::{Bank, Profile};
use criterion::{criterion_group, criterion_main, Criterion};
use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tower::{Layer, Service};

const PROFILE: &str = r#"
dependencies:
  global_client:
    isolation: global
    trip: {consecutive_failures: 5}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: DOWN}
    recovery_bound: 5m
  tenant_client:
    isolation: tenant
    trip: {consecutive_failures: 5}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: DOWN}
    recovery_bound: 5m
"#;

/// One request through `svc`: ready, call, poll once (the futures here
/// are ready at once).
#[inline(always)]
fn call_now<S: Service<Req>, Req>(svc: &mut S, req: Req) -> Option<S::Response> {
    let mut cx = Context::from_waker(Waker::noop());
    match svc.poll_ready(&mut cx) {
        Poll::Ready(Ok(())) => {}
        _ => return None,
    }
    let fut = pin!(svc.call(req));
    match fut.poll(&mut cx) {
        Poll::Ready(Ok(r)) => Some(r),
        _ => None,
    }
}

type Req = (&'static str, u64);

fn tower_layer(c: &mut Criterion) {
    let bank = Bank::new(Profile::from_yaml(PROFILE).expect("a valid profile"));
    let bare = tower::service_fn(|req: Req| std::future::ready(Ok::<u64, Infallible>(req.1)));
    let mut g = c.benchmark_group("tower");

    let mut svc = bare;
    g.bench_function("bare", |b| {
        b.iter(|| call_now(&mut svc, black_box(("acme", 1))))
    });

    let global = bank.dependency("global_client").expect("declared");
    let mut svc = BreakerLayer::new(global).layer(bare);
    g.bench_function("breaker_global", |b| {
        b.iter(|| call_now(&mut svc, black_box(("acme", 1))))
    });

    let tenant = bank.dependency("tenant_client").expect("declared");
    let mut svc = BreakerLayer::new(tenant)
        .tenant(|req: &Req| Some(req.0))
        .layer(bare);
    g.bench_function("breaker_tenant", |b| {
        b.iter(|| call_now(&mut svc, black_box(("acme", 1))))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    targets = tower_layer
}
criterion_main!(benches);
