// Package breakerbank guards a Go service's outbound calls with
// breakerbank's circuit breakers: one breaker per downstream dependency
// and tenant, admission decided lock-free, and an explicit fallback
// whenever a call is not admitted.
//
// It is a cgo binding of the installed C library (`make install`, found
// with pkg-config). The behaviour is the library's; this package only
// translates: a context's deadline becomes the call's deadline, refusals
// and failures become Go errors.
//
//	bank, err := breakerbank.New(profileYAML)
//	...
//	err = bank.Call(ctx, "payments_client", tenant, func(ctx context.Context) error {
//		return charge(ctx, order)
//	})
//	var u *breakerbank.UnavailableError
//	switch {
//	case errors.As(err, &u):
//		// not admitted: answer "try later", in u.RetryAfter
//	case errors.Is(err, breakerbank.ErrDeadlineExpired):
//		// the deadline had passed before the call was made
//	}
package breakerbank

/*
#cgo pkg-config: breakerbank
#include <stdlib.h>
#include "breakerbank.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Bank is a bank of circuit breakers built from a YAML profile. Its
// methods may be called from any number of goroutines at once; Close it
// once, after every other call on it has returned.
type Bank struct {
	ptr    *C.bb_bank
	manual bool
	// The bank's clock at `base`, for turning a context's deadline into a
	// deadline on the bank's clock without asking it each call.
	base   time.Time
	baseNs uint64
	deps   sync.Map // name -> *depInfo
	closed atomic.Bool
}

// depInfo is what a dependency's name resolves to, until a reload gives
// it a new id.
type depInfo struct {
	id uint32
	// code is the profile's error fallback code ("" for stale and
	// degraded fallbacks).
	code string
}

// New builds a bank on the system's monotonic clock.
func New(profileYAML string) (*Bank, error) { return newBank(profileYAML, false) }

// NewWithManualClock builds a bank whose clock starts at 0 and moves only
// with Advance (for tests).
func NewWithManualClock(profileYAML string) (*Bank, error) { return newBank(profileYAML, true) }

func newBank(profileYAML string, manual bool) (*Bank, error) {
	b := &Bank{manual: manual}
	p, n := strArg(profileYAML)
	if s := C.bb_bank_from_yaml(p, n, C.bool(manual), &b.ptr); s != C.BB_OK {
		return nil, lastError(s)
	}
	b.base = time.Now()
	b.baseNs = b.nowNs()
	return b, nil
}

// Close frees the bank. Calls made after it return ErrClosed.
func (b *Bank) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	if s := C.bb_bank_free(b.ptr); s != C.BB_OK {
		return lastError(s)
	}
	return nil
}

// Reload puts a new profile in force, all or nothing: kept dependencies
// keep their breakers' state; the error names every problem.
func (b *Bank) Reload(profileYAML string) error {
	if err := b.live(); err != nil {
		return err
	}
	p, n := strArg(profileYAML)
	if s := C.bb_bank_reload(b.ptr, p, n); s != C.BB_OK {
		return lastError(s)
	}
	// Ids of dependencies a reload started afresh change: look them up again.
	b.deps.Range(func(k, _ any) bool { b.deps.Delete(k); return true })
	return nil
}

// Now is the bank's clock.
func (b *Bank) Now() time.Duration { return time.Duration(b.nowNs()) }

// Advance moves a manual clock forward.
func (b *Bank) Advance(d time.Duration) error {
	if s := C.bb_clock_advance(b.ptr, C.uint64_t(d)); s != C.BB_OK {
		return lastError(s)
	}
	return nil
}

func (b *Bank) nowNs() uint64 {
	var now C.uint64_t
	C.bb_clock_now_ns(b.ptr, &now)
	return uint64(now)
}

func (b *Bank) live() error {
	if b.closed.Load() {
		return ErrClosed
	}
	return nil
}

func (b *Bank) dependency(name string) (*depInfo, error) {
	if d, ok := b.deps.Load(name); ok {
		return d.(*depInfo), nil
	}
	if err := b.live(); err != nil {
		return nil, err
	}
	p, n := strArg(name)
	var id C.uint32_t
	if s := C.bb_dependency_id(b.ptr, p, n, &id); s != C.BB_OK {
		return nil, lastError(s)
	}
	var buf [256]C.char
	var written C.size_t
	d := &depInfo{id: uint32(id)}
	if s := C.bb_fallback_code(b.ptr, id, &buf[0], C.size_t(len(buf)), &written); s == C.BB_OK {
		d.code = C.GoStringN(&buf[0], C.int(written))
	}
	b.deps.Store(name, d)
	return d, nil
}

// deadlineNs is ctx's deadline on the bank's clock (0: none), and
// whether it has passed where the bank cannot be told so (a manual clock
// still at 0, where deadline 0 means none).
func (b *Bank) deadlineNs(ctx context.Context) (uint64, bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	var at int64
	if b.manual {
		now, left := int64(b.nowNs()), time.Until(dl)
		if left <= 0 && now == 0 {
			return 0, true
		}
		at = now + int64(left)
	} else {
		at = int64(b.baseNs) + int64(dl.Sub(b.base))
	}
	if at < 1 {
		return 1, false // already past: the bank answers "deadline expired"
	}
	return uint64(at), false
}

// Outcome is what a call counts as toward its breaker.
type Outcome uint32

const (
	// Success: the dependency answered well.
	Success Outcome = C.BB_OUTCOME_SUCCESS
	// Failure: the dependency failed.
	Failure Outcome = C.BB_OUTCOME_FAILURE
	// Cancelled: the caller gave up before the dependency answered;
	// counts as neither (unless the call had already run slow_call).
	Cancelled Outcome = C.BB_OUTCOME_CANCELLED
)

// Reason says why a call was not admitted.
type Reason uint32

const (
	// ReasonOpen: the breaker is open.
	ReasonOpen Reason = C.BB_REASON_OPEN
	// ReasonProbeBudget: half-open and every probe slot is taken.
	ReasonProbeBudget Reason = C.BB_REASON_PROBE_BUDGET
	// ReasonForcedOpen: isolated by an operator.
	ReasonForcedOpen Reason = C.BB_REASON_FORCED_OPEN
)

func (r Reason) String() string {
	switch r {
	case ReasonOpen:
		return "open"
	case ReasonProbeBudget:
		return "probe budget"
	case ReasonForcedOpen:
		return "forced open"
	}
	return fmt.Sprintf("reason %d", uint32(r))
}

// FallbackKind is the fallback a dependency declares.
type FallbackKind uint32

const (
	// FallbackStale: serve the last good value (the caller's cache).
	FallbackStale FallbackKind = C.BB_FALLBACK_STALE
	// FallbackDegraded: run the caller's degraded behaviour.
	FallbackDegraded FallbackKind = C.BB_FALLBACK_DEGRADED
	// FallbackError: fail with the profile's error code.
	FallbackError FallbackKind = C.BB_FALLBACK_ERROR
)

// State is a breaker's state.
type State uint32

const (
	// Closed: traffic flows.
	Closed State = C.BB_STATE_CLOSED
	// Open: calls get the fallback.
	Open State = C.BB_STATE_OPEN
	// HalfOpen: a few probes are let through.
	HalfOpen State = C.BB_STATE_HALF_OPEN
	// ForcedOpen: isolated by an operator until Reset.
	ForcedOpen State = C.BB_STATE_FORCED_OPEN
)

// CallOption changes one Call.
type CallOption func(*callOptions)

type callOptions struct {
	fallback func(context.Context, *UnavailableError) error
	classify func(error) Outcome
}

// WithFallback gives the behaviour to run when the call is not admitted on
// a dependency whose fallback is stale or degraded: it serves the caller's
// last good value or degraded answer, and its error (nil: served) is what
// Call returns. Refused before admission on a dependency whose fallback is
// an error code, which never uses it.
func WithFallback(f func(ctx context.Context, u *UnavailableError) error) CallOption {
	return func(o *callOptions) { o.fallback = f }
}

// WithClassify says what an error of the call counts as (an expected
// answer such as "not found" is a Success; see Outcome). The error is
// returned whatever it counts as.
func WithClassify(f func(error) Outcome) CallOption {
	return func(o *callOptions) { o.classify = f }
}

// Call makes a call to dependency dep for tenant ("" for none) through
// its breaker. Admitted, it runs fn and records what fn returned: nil is
// a success; an error is a failure, except a context's cancellation or
// deadline once ctx is done, which is a cancellation (and WithClassify's
// rule when given). fn's error is returned as is. A panic in fn is
// recorded as a failure and goes on.
//
// ctx's deadline is the call's deadline: one already passed returns
// ErrDeadlineExpired without running fn and counts nothing. A ctx already
// cancelled returns ctx.Err() without admitting. Not admitted: fn is not
// run; the fallback given with WithFallback runs for a stale or degraded
// dependency, else Call returns an *UnavailableError (errors.Is(err,
// ErrUnavailable)) with RetryAfter.
func (b *Bank) Call(ctx context.Context, dep, tenant string, fn func(context.Context) error, opts ...CallOption) error {
	var o callOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	d, err := b.dependency(dep)
	if err != nil {
		return err
	}
	if o.fallback != nil && d.code != "" {
		return &Error{Status: int(C.BB_ERR_INVALID_ARGUMENT), Message: fmt.Sprintf(
			"dependency `%s` declares an error fallback (code %s): WithFallback would never run", dep, d.code)}
	}
	deadline, expired := b.deadlineNs(ctx)
	if expired {
		return ErrDeadlineExpired
	}
	tp, tn := strArg(tenant)
	var dec C.bb_decision
	s := C.bb_admit(b.ptr, C.uint32_t(d.id), tp, tn, C.uint64_t(deadline), &dec)
	if s == C.BB_ERR_UNKNOWN_DEPENDENCY {
		// A reload may have started it afresh under a new id.
		b.deps.Delete(dep)
		if d, err = b.dependency(dep); err != nil {
			return err
		}
		s = C.bb_admit(b.ptr, C.uint32_t(d.id), tp, tn, C.uint64_t(deadline), &dec)
	}
	if s != C.BB_OK {
		return lastError(s)
	}
	if !bool(dec.admitted) {
		return b.refused(ctx, dep, tenant, d, &dec, &o)
	}
	return b.run(ctx, dec.permit, fn, &o)
}

func (b *Bank) run(ctx context.Context, permit C.bb_permit, fn func(context.Context) error, o *callOptions) (err error) {
	recorded := false
	defer func() {
		if !recorded {
			// fn panicked: the call failed.
			C.bb_record(b.ptr, permit, C.BB_OUTCOME_FAILURE)
		}
	}()
	err = fn(ctx)
	outcome := Success
	if err != nil {
		switch {
		case o.classify != nil:
			outcome = o.classify(err)
		case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
			outcome = Cancelled
		default:
			outcome = Failure
		}
	}
	recorded = true
	if s := C.bb_record(b.ptr, permit, C.bb_outcome(outcome)); s != C.BB_OK {
		return lastError(s)
	}
	return err
}

func (b *Bank) refused(ctx context.Context, dep, tenant string, d *depInfo, dec *C.bb_decision, o *callOptions) error {
	if dec.reason == C.BB_REASON_DEADLINE_EXPIRED {
		return ErrDeadlineExpired
	}
	u := &UnavailableError{
		Dependency: dep,
		Tenant:     tenant,
		Reason:     Reason(dec.reason),
		Fallback:   FallbackKind(dec.fallback),
		Code:       d.code,
		RetryAfter: time.Duration(dec.retry_after_ns),
	}
	if o.fallback != nil && (u.Fallback == FallbackStale || u.Fallback == FallbackDegraded) {
		return o.fallback(ctx, u)
	}
	return u
}

// State reads a breaker's state (a tenant never seen reads Closed).
func (b *Bank) State(dep, tenant string) (State, error) {
	d, err := b.dependency(dep)
	if err != nil {
		return 0, err
	}
	tp, tn := strArg(tenant)
	var st C.bb_breaker_state
	if s := C.bb_state(b.ptr, C.uint32_t(d.id), tp, tn, &st); s != C.BB_OK {
		return 0, lastError(s)
	}
	return State(st), nil
}

// Reset forces a breaker closed ("" on a tenant-scoped dependency: every
// partition).
func (b *Bank) Reset(dep, tenant string) error { return b.operate(dep, tenant, opReset) }

// ForceOpen isolates a breaker until Reset.
func (b *Bank) ForceOpen(dep, tenant string) error { return b.operate(dep, tenant, opForceOpen) }

// Trip opens a breaker as if its trip policy had fired.
func (b *Bank) Trip(dep, tenant string) error { return b.operate(dep, tenant, opTrip) }

const (
	opReset = iota
	opForceOpen
	opTrip
)

func (b *Bank) operate(dep, tenant string, op int) error {
	d, err := b.dependency(dep)
	if err != nil {
		return err
	}
	tp, tn := strArg(tenant)
	var s C.bb_status
	switch op {
	case opReset:
		s = C.bb_reset(b.ptr, C.uint32_t(d.id), tp, tn)
	case opForceOpen:
		s = C.bb_force_open(b.ptr, C.uint32_t(d.id), tp, tn)
	default:
		s = C.bb_trip(b.ptr, C.uint32_t(d.id), tp, tn)
	}
	if s != C.BB_OK {
		return lastError(s)
	}
	return nil
}

// Prometheus is the bank's metrics as Prometheus text exposition.
func (b *Bank) Prometheus() (string, error) {
	if err := b.live(); err != nil {
		return "", err
	}
	var need C.size_t
	for {
		buf := make([]byte, int(need)+4096)
		s := C.bb_metrics_prometheus(b.ptr, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &need)
		if s == C.BB_OK {
			return string(buf[:need]), nil
		}
		if s != C.BB_ERR_BUFFER_TOO_SMALL {
			return "", lastError(s)
		}
	}
}

// strArg is s as a (pointer, length) argument: Go's bytes, read by C
// during the call only (no copy; C never keeps it).
func strArg(s string) (*C.char, C.size_t) {
	if len(s) == 0 {
		return nil, 0
	}
	h := (*reflect.StringHeader)(unsafe.Pointer(&s))
	return (*C.char)(unsafe.Pointer(h.Data)), C.size_t(len(s))
}
