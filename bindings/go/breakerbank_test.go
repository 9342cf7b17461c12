package breakerbank

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const profile = `
dependencies:
  payments_client:
    isolation: tenant
    trip: {consecutive_failures: 3}
    open_duration: 30s
    half_open: {probe_budget: 2, success_threshold: 2}
    fallback: {kind: error, code: PAYMENT_UNAVAILABLE}
    recovery_bound: 5m
  search_client:
    isolation: global
    trip: {consecutive_failures: 2}
    open_duration: 10s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: stale, max_staleness: 10m}
    recovery_bound: 1m
  email_client:
    isolation: global
    trip: {consecutive_failures: 2}
    open_duration: 10s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: degraded}
    recovery_bound: 1m
`

var errDown = errors.New("downstream failed")

func manualBank(t *testing.T) *Bank {
	t.Helper()
	b, err := NewWithManualClock(profile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func fail(context.Context) error { return errDown }
func ok(context.Context) error   { return nil }

func mustState(t *testing.T, b *Bank, dep, tenant string, want State) {
	t.Helper()
	got, err := b.State(dep, tenant)
	if err != nil || got != want {
		t.Fatalf("state of %s/%s: %v, %v; want %v", dep, tenant, got, err, want)
	}
}

// C9: one tenant's failures open its breaker only, also when many
// tenants call at once.
func TestC9TenantIsolation(t *testing.T) {
	b := manualBank(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		tenant := fmt.Sprintf("tenant-%02d", i)
		failing := i%4 == 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				fn := ok
				if failing {
					fn = fail
				}
				_ = b.Call(ctx, "payments_client", tenant, fn)
			}
		}()
	}
	wg.Wait()
	for i := 0; i < 40; i++ {
		want := Closed
		if i%4 == 0 {
			want = Open
		}
		mustState(t, b, "payments_client", fmt.Sprintf("tenant-%02d", i), want)
	}
	ran := false
	err := b.Call(ctx, "payments_client", "tenant-00", func(context.Context) error { ran = true; return nil })
	var u *UnavailableError
	if ran || !errors.As(err, &u) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("open tenant: ran %v, err %v", ran, err)
	}
	if u.Reason != ReasonOpen || u.Code != "PAYMENT_UNAVAILABLE" || u.RetryAfter != 30*time.Second || u.Tenant != "tenant-00" {
		t.Fatalf("refusal: %+v", u)
	}
	if err := b.Call(ctx, "payments_client", "tenant-01", ok); err != nil {
		t.Fatal(err)
	}
	if err := b.Call(ctx, "payments_client", "", ok); !errors.Is(err, ErrTenantRequired) {
		t.Fatalf("no tenant: %v", err)
	}
}

// C7: however many goroutines call a half-open breaker at once, at most
// probe_budget calls run.
func TestC7ProbeBudgetUnderManyGoroutines(t *testing.T) {
	b := manualBank(t)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		_ = b.Call(ctx, "payments_client", "acme", fail)
	}
	if err := b.Advance(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	const callers = 64
	var (
		arrived  sync.WaitGroup
		finished sync.WaitGroup
		inFlight atomic.Int32
		maxIn    atomic.Int32
		ran      atomic.Int32
		budget   atomic.Int32
	)
	release := make(chan struct{})
	arrived.Add(callers)
	finished.Add(callers)
	for i := 0; i < callers; i++ {
		go func() {
			defer finished.Done()
			started := false
			err := b.Call(ctx, "payments_client", "acme", func(context.Context) error {
				started = true
				ran.Add(1)
				n := inFlight.Add(1)
				for m := maxIn.Load(); n > m && !maxIn.CompareAndSwap(m, n); m = maxIn.Load() {
				}
				arrived.Done()
				<-release
				inFlight.Add(-1)
				return nil
			})
			var u *UnavailableError
			if !started {
				if errors.As(err, &u) && u.Reason == ReasonProbeBudget {
					budget.Add(1)
				}
				arrived.Done()
			}
		}()
	}
	arrived.Wait()
	close(release)
	finished.Wait()
	if maxIn.Load() > 2 || ran.Load() != 2 || budget.Load() != callers-2 {
		t.Fatalf("C7: max in flight %d, ran %d, probe-budget refusals %d (budget 2)", maxIn.Load(), ran.Load(), budget.Load())
	}
	mustState(t, b, "payments_client", "acme", Closed)
}

// C3, C4: a refused call takes the declared fallback: the caller's stale
// value or degraded answer through WithFallback, else the refusal.
func TestC3Fallbacks(t *testing.T) {
	b := manualBank(t)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		_ = b.Call(ctx, "search_client", "", fail)
		_ = b.Call(ctx, "email_client", "", fail)
	}
	var served string
	stale := WithFallback(func(_ context.Context, u *UnavailableError) error {
		if u.Fallback != FallbackStale || u.Reason != ReasonOpen || u.RetryAfter != 10*time.Second {
			t.Errorf("stale fallback got %+v", u)
		}
		served = "cached results"
		return nil
	})
	if err := b.Call(ctx, "search_client", "", fail, stale); err != nil || served != "cached results" {
		t.Fatalf("stale: %v, %q", err, served)
	}
	// No cached value: the fallback says so, and that is the answer.
	noValue := WithFallback(func(_ context.Context, u *UnavailableError) error { return u })
	if err := b.Call(ctx, "search_client", "", ok, noValue); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("stale without a value: %v", err)
	}
	degraded := WithFallback(func(_ context.Context, u *UnavailableError) error {
		if u.Fallback != FallbackDegraded {
			t.Errorf("degraded fallback got %+v", u)
		}
		return nil
	})
	if err := b.Call(ctx, "email_client", "", fail, degraded); err != nil {
		t.Fatalf("degraded: %v", err)
	}
	var u *UnavailableError
	if err := b.Call(ctx, "email_client", "", ok); !errors.As(err, &u) || u.Fallback != FallbackDegraded {
		t.Fatalf("no fallback given: %v", err)
	}
	// C17: an error fallback never uses one: refused before admission.
	ran := false
	err := b.Call(ctx, "payments_client", "acme", func(context.Context) error { ran = true; return nil }, degraded)
	if ran || !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("fallback on an error dependency: ran %v, %v", ran, err)
	}
}

// C10: a deadline already passed runs nothing and counts nothing; a
// cancellation counts as neither failure nor success.
func TestC10Deadlines(t *testing.T) {
	b := manualBank(t)
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	for i := 0; i < 5; i++ {
		err := b.Call(expired, "search_client", "", fail)
		if !errors.Is(err, ErrDeadlineExpired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("expired: %v", err)
		}
	}
	mustState(t, b, "search_client", "", Closed)
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		err := b.Call(ctx, "search_client", "", func(ctx context.Context) error {
			cancel()
			return ctx.Err()
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled: %v", err)
		}
	}
	mustState(t, b, "search_client", "", Closed)
	ctx, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := b.Call(ctx, "search_client", "", fail); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled before: %v", err)
	}
	// A deadline in the future is the call's, on the bank's clock.
	future, cancel3 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel3()
	if err := b.Call(future, "search_client", "", ok); err != nil {
		t.Fatal(err)
	}
}

// C17: WithClassify says what an error counts as; a panic is a failure.
func TestC17ClassifyAndPanics(t *testing.T) {
	b := manualBank(t)
	ctx := context.Background()
	notFound := WithClassify(func(error) Outcome { return Success })
	for i := 0; i < 3; i++ {
		if err := b.Call(ctx, "search_client", "", fail, notFound); !errors.Is(err, errDown) {
			t.Fatalf("classified error not returned: %v", err)
		}
	}
	mustState(t, b, "search_client", "", Closed)
	for i := 0; i < 2; i++ {
		func() {
			defer func() { _ = recover() }()
			_ = b.Call(ctx, "search_client", "", func(context.Context) error { panic("boom") })
		}()
	}
	mustState(t, b, "search_client", "", Open)
}

// C20: a reload keeps a kept dependency's breakers and applies the new
// thresholds; a removed dependency is unknown; a bad profile changes
// nothing.
func TestC20Reload(t *testing.T) {
	b := manualBank(t)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		_ = b.Call(ctx, "payments_client", "acme", fail)
	}
	var cfgErr *Error
	if err := b.Reload("dependencies: {}\nbogus: 1\n"); !errors.Is(err, ErrConfig) || !errors.As(err, &cfgErr) || cfgErr.Message == "" {
		t.Fatalf("bad profile: %v", err)
	}
	next := `
dependencies:
  payments_client:
    isolation: tenant
    trip: {consecutive_failures: 1}
    open_duration: 30s
    half_open: {probe_budget: 2, success_threshold: 2}
    fallback: {kind: error, code: PAYMENT_UNAVAILABLE}
    recovery_bound: 5m
`
	if err := b.Reload(next); err != nil {
		t.Fatal(err)
	}
	mustState(t, b, "payments_client", "acme", Open)
	_ = b.Call(ctx, "payments_client", "globex", fail)
	mustState(t, b, "payments_client", "globex", Open)
	if err := b.Call(ctx, "search_client", "", ok); !errors.Is(err, ErrUnknownDependency) {
		t.Fatalf("removed dependency: %v", err)
	}
	// Reloads racing calls.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				_ = b.Call(ctx, "payments_client", fmt.Sprintf("t%d", i), ok)
			}
		}(i)
	}
	for j := 0; j < 20; j++ {
		if err := b.Reload(next); err != nil {
			t.Error(err)
		}
	}
	wg.Wait()
}

func TestOperatorAndMetrics(t *testing.T) {
	b := manualBank(t)
	if err := b.ForceOpen("payments_client", "acme"); err != nil {
		t.Fatal(err)
	}
	var u *UnavailableError
	if err := b.Call(context.Background(), "payments_client", "acme", ok); !errors.As(err, &u) || u.Reason != ReasonForcedOpen || u.RetryAfter != 0 {
		t.Fatalf("forced open: %v", err)
	}
	if err := b.Reset("payments_client", "acme"); err != nil {
		t.Fatal(err)
	}
	mustState(t, b, "payments_client", "acme", Closed)
	text, err := b.Prometheus()
	if err != nil || len(text) == 0 {
		t.Fatalf("prometheus: %v", err)
	}
	if _, err := b.State("no_such_client", ""); !errors.Is(err, ErrUnknownDependency) {
		t.Fatalf("unknown: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Call(context.Background(), "search_client", "", ok); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}

// The cost of one cgo call into the library (a clock read), the floor
// under every call of this package.
func BenchmarkCgoCall(b *testing.B) {
	bank, err := New(profile)
	if err != nil {
		b.Fatal(err)
	}
	defer bank.Close()
	for i := 0; i < b.N; i++ {
		_ = bank.Now()
	}
}

// Call on a closed global breaker: bb_admit, the function, bb_record.
func BenchmarkCallClosedGlobal(b *testing.B) {
	bank, err := New(profile)
	if err != nil {
		b.Fatal(err)
	}
	defer bank.Close()
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		if err := bank.Call(ctx, "email_client", "", ok); err != nil {
			b.Fatal(err)
		}
	}
}

// Call on a closed tenant-scoped breaker, 100 000 tenants round-robin.
func BenchmarkCallClosedTenant100k(b *testing.B) {
	bank, err := New(profile)
	if err != nil {
		b.Fatal(err)
	}
	defer bank.Close()
	ctx := context.Background()
	tenants := make([]string, 100000)
	for i := range tenants {
		tenants[i] = fmt.Sprintf("tenant-%06d", i)
		_ = bank.Call(ctx, "payments_client", tenants[i], ok)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := bank.Call(ctx, "payments_client", tenants[i%len(tenants)], ok); err != nil {
			b.Fatal(err)
		}
	}
}

// C22: in observe mode every call runs and counts, and each firing of the
// trip policy counts a would-trip instead of opening: 15 failures at a
// threshold of 5 are 15 calls made and 3 would-trips, in the exposition.
func TestC22ObserveModeAdmitsEveryCallAndCountsWouldTrips(t *testing.T) {
	b, err := NewWithManualClock(`
dependencies:
  svc_client:
    isolation: tenant
    mode: observe
    trip: {consecutive_failures: 5}
    open_duration: 30s
    half_open: {probe_budget: 1, success_threshold: 1}
    fallback: {kind: error, code: SVC_UNAVAILABLE}
    recovery_bound: 5m
`)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	ran := 0
	for i := 0; i < 15; i++ {
		err := b.Call(context.Background(), "svc_client", "acme", func(context.Context) error {
			ran++
			return errDown
		})
		if !errors.Is(err, errDown) {
			t.Fatalf("call %d: %v, want the call's own error", i, err)
		}
		mustState(t, b, "svc_client", "acme", Closed)
	}
	if ran != 15 {
		t.Fatalf("%d calls ran, want 15", ran)
	}
	text, err := b.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"breakerbank_dependency_would_trip_total{dependency=\"svc_client\"} 3.0\n",
		"breakerbank_dependency_opened_total{dependency=\"svc_client\"} 0.0\n",
	} {
		if !strings.Contains(text, want) {
			t.Fatalf("exposition lacks %q:\n%s", want, text)
		}
	}
	// Another tenant's breaker is untouched.
	mustState(t, b, "svc_client", "globex", Closed)
}
