//! A [`tower`](https://docs.rs/tower) layer over a dependency (feature
//! `tower`): every request the wrapped service would send is first
//! admitted by the dependency's breaker for the request's tenant.
//!
//! - Admitted: the inner service is called, and the permit is recorded
//!   when its response future completes: a response is what the response
//!   classifier says (a success by default; an HTTP client counts its
//!   5xx as failures with [`BreakerLayer::classify_response`]), an error
//!   what the layer's error classifier says, else the dependency's
//!   ([`Dependency::set_classify`]), else a failure (C17). A response
//!   future dropped before it completes is a call given up (C10, C13):
//!   cancelled, its probe slot given back, or a slow failure once it ran
//!   `slow_call`, so a server that hangs trips the breaker.
//! - Refused: the inner service is not called. The future answers at once
//!   with the dependency's declared fallback: a `degraded` dependency's
//!   response from [`BreakerLayer::degraded`], otherwise
//!   [`CallError::Unavailable`] carrying [`DependencyUnavailable`](crate::DependencyUnavailable),
//!   which says why (C3, C4). A `stale` fallback is served nothing by the
//!   layer: responses are not values it can keep.
//!
//! `poll_ready` is the inner service's: readiness is the inner service's
//! to say (a connection pool, a concurrency limit), and the breaker decides
//! in `call`, where the request (and so its tenant) is known. A refused
//! call leaves the readiness it was given unused, as tower allows.
//!
//! The layer holds no breaker logic: it drives the core's one call,
//! [`Dependency::begin`], a [`Running`] call's end and a [`Refused`] one's
//! fallback.
//!
//! ```
//! use breakerbank::tower::BreakerLayer;
//! use breakerbank::{Bank, CallError, Outcome, Profile};
//! use tower::{Layer, Service, ServiceExt};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let bank = Bank::new(Profile::from_yaml(r#"
//! dependencies:
//!   quotes_client:
//!     isolation: tenant
//!     trip: {consecutive_failures: 2}
//!     open_duration: 30s
//!     half_open: {probe_budget: 1, success_threshold: 1}
//!     fallback: {kind: error, code: QUOTES_DOWN}
//!     recovery_bound: 5m
//! "#).unwrap());
//! // A stand-in for an HTTP client: (tenant, path) in, a status out.
//! let client = tower::service_fn(|(_tenant, path): (String, &'static str)| async move {
//!     Ok::<u16, std::io::Error>(if path == "/broken" { 503 } else { 200 })
//! });
//! let mut quotes = BreakerLayer::new(bank.dependency("quotes_client").unwrap())
//!     .tenant(|req: &(String, &'static str)| Some(req.0.as_str()))
//!     .classify_response(|status: &u16| {
//!         if *status >= 500 { Outcome::Failure } else { Outcome::Success }
//!     })
//!     .layer(client);
//!
//! for _ in 0..2 {
//!     let status = quotes.ready().await.unwrap().call(("acme".into(), "/broken")).await;
//!     assert_eq!(status.unwrap(), 503); // answered, and counted as a failure
//! }
//! // acme's breaker is open: refused without calling the client.
//! match quotes.ready().await.unwrap().call(("acme".into(), "/")).await {
//!     Err(CallError::Unavailable(u)) => assert_eq!(u.code.as_deref(), Some("QUOTES_DOWN")),
//!     other => panic!("{other:?}"),
//! }
//! // Another tenant is untouched (C9).
//! let ok = quotes.ready().await.unwrap().call(("globex".into(), "/")).await;
//! assert_eq!(ok.unwrap(), 200);
//! # });
//! ```

use crate::call::{Begun, CallError, Raw, Refused, Running};
use crate::dependency::{Dependency, RawPermit};
use crate::outcome::Outcome;
use crate::sync::StdArc;
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// Where a request's tenant comes from: a closure
/// `for<'r> Fn(&'r Req) -> Option<&'r str>` (set with
/// [`BreakerLayer::tenant`]), or `()`: no tenant, for a global dependency.
/// A tenant-scoped dependency given no tenant answers
/// [`CallError::TenantRequired`] without calling the inner service.
pub trait TenantOf<Req> {
    /// The request's tenant id.
    fn tenant_of<'r>(&self, req: &'r Req) -> Option<&'r str>;
}

impl<Req> TenantOf<Req> for () {
    #[inline(always)]
    fn tenant_of<'r>(&self, _: &'r Req) -> Option<&'r str> {
        None
    }
}

impl<Req, F> TenantOf<Req> for F
where
    F: for<'r> Fn(&'r Req) -> Option<&'r str>,
{
    #[inline(always)]
    fn tenant_of<'r>(&self, req: &'r Req) -> Option<&'r str> {
        self(req)
    }
}

/// What an error of the inner service counts as (C17): a closure
/// `Fn(&E) -> Outcome` (set with [`BreakerLayer::classify_error`]), or
/// `()`: the dependency's classifier ([`Dependency::set_classify`]), else
/// every error a failure.
pub trait ClassifyError<E> {
    /// The outcome `error` counts as; `None` leaves it to the dependency.
    fn classify_error(&self, error: &E) -> Option<Outcome>;
}

impl<E> ClassifyError<E> for () {
    #[inline(always)]
    fn classify_error(&self, _: &E) -> Option<Outcome> {
        None
    }
}

impl<E, F: Fn(&E) -> Outcome> ClassifyError<E> for F {
    #[inline(always)]
    fn classify_error(&self, error: &E) -> Option<Outcome> {
        Some(self(error))
    }
}

/// What a response of the inner service counts as: a closure
/// `Fn(&Resp) -> Outcome` (set with [`BreakerLayer::classify_response`]),
/// or `()`: every response a success.
pub trait ClassifyResponse<Resp> {
    /// The outcome `response` counts as.
    fn classify_response(&self, response: &Resp) -> Outcome;
}

impl<Resp> ClassifyResponse<Resp> for () {
    #[inline(always)]
    fn classify_response(&self, _: &Resp) -> Outcome {
        Outcome::Success
    }
}

impl<Resp, F: Fn(&Resp) -> Outcome> ClassifyResponse<Resp> for F {
    #[inline(always)]
    fn classify_response(&self, response: &Resp) -> Outcome {
        self(response)
    }
}

/// The degraded response a refused request gets from a dependency whose
/// fallback is `degraded` (C3): a closure `Fn(&Req) -> Option<Resp>`
/// (set with [`BreakerLayer::degraded`]; `None`: it cannot serve this
/// one), or `()`: none, so such a refusal is
/// [`CallError::Unavailable`] and a fallback failure (C4).
pub trait Degrade<Req, Resp> {
    /// The degraded response to `req`, if there is one.
    fn degrade(&self, req: &Req) -> Option<Resp>;

    /// Whether a degraded behaviour was given (C4: a refusal without one
    /// says so).
    #[inline(always)]
    fn given(&self) -> bool {
        true
    }
}

impl<Req, Resp> Degrade<Req, Resp> for () {
    #[inline(always)]
    fn degrade(&self, _: &Req) -> Option<Resp> {
        None
    }

    #[inline(always)]
    fn given(&self) -> bool {
        false
    }
}

impl<Req, Resp, F: Fn(&Req) -> Option<Resp>> Degrade<Req, Resp> for F {
    #[inline(always)]
    fn degrade(&self, req: &Req) -> Option<Resp> {
        self(req)
    }
}

/// The layer's configuration, shared by the services it makes and their
/// response futures: the dependency, where the tenant comes from, the two
/// classifiers and the degraded response.
#[derive(Clone)]
pub struct Policy<T, C, R, D> {
    dep: Dependency,
    tenant: T,
    on_error: C,
    on_response: R,
    degraded: D,
}

impl<T, C, R, D> fmt::Debug for Policy<T, C, R, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("dependency", &self.dep)
            .finish_non_exhaustive()
    }
}

/// A [`tower_layer::Layer`] that puts a dependency's breaker in front of a
/// service: see the [module docs](self). Built with
/// [`BreakerLayer::new`], then optionally [`tenant`](Self::tenant),
/// [`classify_error`](Self::classify_error),
/// [`classify_response`](Self::classify_response) and
/// [`degraded`](Self::degraded), each a closure (`()` stands for the
/// default). Each service it makes shares one copy of this configuration
/// with its clones and response futures, so the closures are cloned once
/// per [`layer`](tower_layer::Layer::layer) call, never per request.
#[derive(Clone)]
pub struct BreakerLayer<T = (), C = (), R = (), D = ()> {
    policy: Policy<T, C, R, D>,
}

impl<T, C, R, D> fmt::Debug for BreakerLayer<T, C, R, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerLayer")
            .field("policy", &self.policy)
            .finish()
    }
}

impl BreakerLayer {
    /// A layer for `dependency`: no tenant (a global dependency), every
    /// error a failure, every response a success, no degraded response.
    pub fn new(dependency: Dependency) -> Self {
        BreakerLayer {
            policy: Policy {
                dep: dependency,
                tenant: (),
                on_error: (),
                on_response: (),
                degraded: (),
            },
        }
    }
}

impl<T, C, R, D> BreakerLayer<T, C, R, D> {
    /// The same layer with its parts replaced by what `f` makes of them.
    fn with<T2, C2, R2, D2>(
        self,
        f: impl FnOnce(T, C, R, D) -> (T2, C2, R2, D2),
    ) -> BreakerLayer<T2, C2, R2, D2> {
        let p = self.policy;
        let (tenant, on_error, on_response, degraded) =
            f(p.tenant, p.on_error, p.on_response, p.degraded);
        BreakerLayer {
            policy: Policy {
                dep: p.dep,
                tenant,
                on_error,
                on_response,
                degraded,
            },
        }
    }

    /// The dependency the layer admits through.
    pub fn dependency(&self) -> &Dependency {
        &self.policy.dep
    }

    /// Takes each request's tenant from `tenant` (a header, an extension,
    /// a field): required for a tenant-scoped dependency (C9).
    pub fn tenant<Req, F>(self, tenant: F) -> BreakerLayer<F, C, R, D>
    where
        F: for<'r> Fn(&'r Req) -> Option<&'r str>,
    {
        self.with(|_, c, r, d| (tenant, c, r, d))
    }

    /// Counts each error of the inner service as `classify` says (C17):
    /// [`Outcome::Success`] for an expected answer, [`Outcome::Cancelled`]
    /// for neither, [`Outcome::Failure`] for a failure of the dependency.
    pub fn classify_error<E, F>(self, classify: F) -> BreakerLayer<T, F, R, D>
    where
        F: Fn(&E) -> Outcome,
    {
        self.with(|t, _, r, d| (t, classify, r, d))
    }

    /// Counts each response of the inner service as `classify` says: how
    /// an HTTP client counts a 5xx as a failure (and, if it likes, a 4xx as
    /// a success) though the service returned it without an error.
    pub fn classify_response<Resp, F>(self, classify: F) -> BreakerLayer<T, C, F, D>
    where
        F: Fn(&Resp) -> Outcome,
    {
        self.with(|t, c, _, d| (t, c, classify, d))
    }

    /// The response a refused request gets when the dependency's fallback
    /// is `degraded` (C3); `None` from it is a fallback failure, answered
    /// with [`CallError::Unavailable`] (C4). Ignored for other fallbacks.
    pub fn degraded<Req, Resp, F>(self, degraded: F) -> BreakerLayer<T, C, R, F>
    where
        F: Fn(&Req) -> Option<Resp>,
    {
        self.with(|t, c, r, _| (t, c, r, degraded))
    }
}

impl<S, T: Clone, C: Clone, R: Clone, D: Clone> tower_layer::Layer<S> for BreakerLayer<T, C, R, D> {
    type Service = Breaker<S, T, C, R, D>;

    fn layer(&self, inner: S) -> Self::Service {
        Breaker {
            inner,
            policy: StdArc::new(self.policy.clone()),
        }
    }
}

/// The service [`BreakerLayer`] makes: `inner` behind the dependency's
/// breaker. Cloning it clones `inner` and shares the configuration.
pub struct Breaker<S, T = (), C = (), R = (), D = ()> {
    inner: S,
    policy: StdArc<Policy<T, C, R, D>>,
}

impl<S: Clone, T, C, R, D> Clone for Breaker<S, T, C, R, D> {
    fn clone(&self) -> Self {
        Breaker {
            inner: self.inner.clone(),
            policy: self.policy.clone(),
        }
    }
}

impl<S: fmt::Debug, T, C, R, D> fmt::Debug for Breaker<S, T, C, R, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("inner", &self.inner)
            .field("policy", &self.policy)
            .finish()
    }
}

impl<S, T, C, R, D> Breaker<S, T, C, R, D> {
    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The dependency the service admits through.
    pub fn dependency(&self) -> &Dependency {
        &self.policy.dep
    }
}

impl<S, Req, T, C, R, D> tower_service::Service<Req> for Breaker<S, T, C, R, D>
where
    S: tower_service::Service<Req>,
    S::Error: 'static,
    T: TenantOf<Req>,
    C: ClassifyError<S::Error>,
    R: ClassifyResponse<S::Response>,
    D: Degrade<Req, S::Response>,
{
    type Response = S::Response;
    type Error = CallError<S::Error>;
    type Future = ResponseFuture<S::Future, S::Response, S::Error, T, C, R, D>;

    /// The inner service's readiness; its error, if any, is
    /// [`CallError::Inner`] and counts against nothing (no call was
    /// admitted).
    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(CallError::Inner)
    }

    #[inline]
    fn call(&mut self, req: Req) -> Self::Future {
        let policy = &*self.policy;
        let tenant = policy.tenant.tenant_of(&req);
        let permit = match policy.dep.begin(tenant, None) {
            Ok(Begun::Running(call)) => call.into_raw(),
            Ok(Begun::Refused(refused)) => {
                return ResponseFuture::answered(policy.refused(refused, &req))
            }
            Err(e) => return ResponseFuture::answered(Err(e.into())),
        };
        // Armed before the inner call: if that panics, the call is given
        // up with it (C10, C13).
        let armed = Armed {
            policy: self.policy.clone(),
            permit: Some(permit),
        };
        ResponseFuture::called(self.inner.call(req), armed)
    }
}

/// The stale-cache type the layer asks for: no one can have put one, so a
/// `stale` fallback serves nothing through the layer.
impl<T, C, R, D> Policy<T, C, R, D> {
    /// A refusal's answer: the degraded response if the layer has one
    /// (C3), else the refusal's error, saying why (C4). Responses are not
    /// values a stale cache keeps.
    #[inline(never)]
    fn refused<Req, Resp, E>(&self, refused: Refused<'_>, req: &Req) -> Result<Resp, CallError<E>>
    where
        D: Degrade<Req, Resp>,
    {
        let degraded = self
            .degraded
            .given()
            .then_some(|| self.degraded.degrade(req));
        refused.serve_uncached(degraded).map_err(CallError::from)
    }
}

struct Armed<T, C, R, D> {
    policy: StdArc<Policy<T, C, R, D>>,
    permit: Option<RawPermit>,
}

impl<T, C, R, D> Armed<T, C, R, D> {
    /// The running call, once: the permit is taken out.
    #[inline(always)]
    fn take(&mut self) -> Option<Running<'_, Raw<'_>>> {
        let permit = self.permit.take()?;
        Some(Running::raw(&self.policy.dep, permit, None))
    }
}

impl<T, C, R, D> Drop for Armed<T, C, R, D> {
    fn drop(&mut self) {
        // Only a future dropped before its inner one completed gets here
        // with its permit: the caller gave up (C10, C13).
        if let Some(call) = self.take() {
            call.given_up();
        }
    }
}

pin_project! {
    /// The response future of [`Breaker`]: the inner service's future and
    /// the permit it was admitted with, or a refusal's answer.
    pub struct ResponseFuture<F, Resp, E, T = (), C = (), R = (), D = ()> {
        #[pin]
        kind: Kind<F, Resp, E, T, C, R, D>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, Resp, E, T, C, R, D> {
        Called {
            #[pin]
            fut: F,
            armed: Armed<T, C, R, D>,
        },
        Answered {
            answer: Option<Result<Resp, CallError<E>>>,
        },
    }
}

impl<F, Resp, E, T, C, R, D> ResponseFuture<F, Resp, E, T, C, R, D> {
    #[inline(always)]
    fn called(fut: F, armed: Armed<T, C, R, D>) -> Self {
        ResponseFuture {
            kind: Kind::Called { fut, armed },
        }
    }

    #[inline(always)]
    fn answered(answer: Result<Resp, CallError<E>>) -> Self {
        ResponseFuture {
            kind: Kind::Answered {
                answer: Some(answer),
            },
        }
    }
}

impl<F, Resp, E, T, C, R, D> fmt::Debug for ResponseFuture<F, Resp, E, T, C, R, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.kind {
            Kind::Called { .. } => "called",
            Kind::Answered { answer: Some(_) } => "answered",
            Kind::Answered { answer: None } => "done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}

impl<F, Resp, E, T, C, R, D> Future for ResponseFuture<F, Resp, E, T, C, R, D>
where
    F: Future<Output = Result<Resp, E>>,
    E: 'static,
    C: ClassifyError<E>,
    R: ClassifyResponse<Resp>,
{
    type Output = Result<Resp, CallError<E>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Called { fut, armed } => {
                let out = ready!(fut.poll(cx));
                let policy = armed.policy.clone();
                if let Some(call) = armed.take() {
                    match &out {
                        Ok(response) => {
                            let _ = call.end(policy.on_response.classify_response(response));
                        }
                        // The layer's classifier, else the dependency's
                        // chain (C17).
                        Err(error) => match policy.on_error.classify_error(error) {
                            Some(outcome) => {
                                let _ = call.end(outcome);
                            }
                            None => {
                                call.end_err(error, None);
                            }
                        },
                    }
                }
                Poll::Ready(out.map_err(CallError::Inner))
            }
            KindProj::Answered { answer } => Poll::Ready(
                answer
                    .take()
                    .expect("ResponseFuture polled after completion"),
            ),
        }
    }
}
