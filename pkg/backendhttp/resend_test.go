package backendhttp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A write sent WithoutResend goes again only when it surely did not reach
// the server; any other request keeps go-retryablehttp's policy.
func TestWithoutResendRetriesOnlyWhatNeverReachedTheServer(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	for _, tc := range []struct {
		name           string
		resp           *http.Response
		err            error
		plain, without bool
	}{
		{"a refused connection", nil, dial, true, true},
		{"a connection cut after sending", nil, reset, true, false},
		{"an unexpected EOF", nil, errors.New("unexpected EOF"), true, false},
		{"a server error", &http.Response{StatusCode: http.StatusBadGateway}, nil, true, false},
		{"throttled", &http.Response{StatusCode: http.StatusTooManyRequests}, nil, true, true},
		{"an answer", &http.Response{StatusCode: http.StatusOK}, nil, false, false},
		{"a refusal", &http.Response{StatusCode: http.StatusBadRequest}, nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain, _ := checkRetry(context.Background(), tc.resp, tc.err)
			assert.Equal(t, tc.plain, plain, "without WithoutResend")
			without, _ := checkRetry(WithoutResend(context.Background()), tc.resp, tc.err)
			assert.Equal(t, tc.without, without, "WithoutResend")
		})
	}
}
