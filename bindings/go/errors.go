package breakerbank

/*
#include "breakerbank.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrUnavailable matches (errors.Is) every refusal that no fallback served.
var ErrUnavailable = errors.New("breakerbank: dependency unavailable")

// ErrDeadlineExpired is returned when the call's deadline had already
// passed at admission: nothing ran, nothing counted. It also matches
// context.DeadlineExceeded.
var ErrDeadlineExpired error = deadlineExpired{}

// ErrClosed is returned by calls on a closed Bank.
var ErrClosed = errors.New("breakerbank: bank closed")

// Sentinels for the library's other refusals, matched by *Error.
var (
	ErrInvalidArgument   = &Error{Status: int(C.BB_ERR_INVALID_ARGUMENT)}
	ErrConfig            = &Error{Status: int(C.BB_ERR_CONFIG)}
	ErrUnknownDependency = &Error{Status: int(C.BB_ERR_UNKNOWN_DEPENDENCY)}
	ErrTenantRequired    = &Error{Status: int(C.BB_ERR_TENANT_REQUIRED)}
	ErrInvalidTenant     = &Error{Status: int(C.BB_ERR_INVALID_TENANT)}
	ErrNotManualClock    = &Error{Status: int(C.BB_ERR_NOT_MANUAL_CLOCK)}
)

type deadlineExpired struct{}

func (deadlineExpired) Error() string {
	return "breakerbank: the call's deadline had already expired"
}

func (deadlineExpired) Is(target error) bool { return target == context.DeadlineExceeded }

// UnavailableError is a call that was not admitted and that no fallback
// served: its dependency, why, the fallback it declares, the error code
// of an error fallback, and when the breaker next admits a probe.
type UnavailableError struct {
	Dependency string
	Tenant     string
	Reason     Reason
	Fallback   FallbackKind
	// Code is the profile's fallback code ("" unless Fallback is FallbackError).
	Code string
	// RetryAfter is the time until the breaker next admits a probe (0 when
	// it is not open, or is forced open).
	RetryAfter time.Duration
}

func (u *UnavailableError) Error() string {
	msg := fmt.Sprintf("breakerbank: dependency `%s` unavailable (%s)", u.Dependency, u.Reason)
	if u.Tenant != "" {
		msg = fmt.Sprintf("breakerbank: dependency `%s` unavailable for tenant `%s` (%s)", u.Dependency, u.Tenant, u.Reason)
	}
	if u.Code != "" {
		msg += ", code " + u.Code
	}
	if u.RetryAfter > 0 {
		msg += fmt.Sprintf(", retry after %s", u.RetryAfter)
	}
	return msg
}

// Is makes errors.Is(err, ErrUnavailable) true.
func (u *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Error is a status the C library returned, with its message.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return "breakerbank: " + e.Message }

// Is matches an *Error of the same status (the sentinels above).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Status == e.Status
}

// lastError is status s with the calling thread's message.
//
// The library keeps the message per OS thread, and between the failing
// call and this one the goroutine may have moved to another thread
// (rarely: nothing in between yields): then the message is that thread's
// last one. The status, which errors.Is matches, is always the call's.
func lastError(s C.bb_status) error {
	var buf [1024]C.char
	var n C.size_t
	msg := fmt.Sprintf("status %d", int(s))
	if C.bb_last_error(&buf[0], C.size_t(len(buf)), &n) == C.BB_OK && n > 0 {
		msg = C.GoStringN(&buf[0], C.int(n))
	}
	return &Error{Status: int(s), Message: msg}
}
