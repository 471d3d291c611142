package netboxsim

import (
	"net/http"
	"strings"
)

// v2TokenPrefix starts every NetBox 4.5+ v2 token ("nbt_<key>.<secret>").
const v2TokenPrefix = "nbt_"

// DRF and NetBox texts for rejected requests; all are 403 because NetBox's
// first authentication class sends no WWW-Authenticate challenge.
const (
	msgNotAuthenticated = "Authentication credentials were not provided."
	msgNoPermission     = "You do not have permission to perform this action."
)

type tokenInfo struct {
	writeEnabled bool
	v2           bool
}

// AddToken registers an API token. A token starting with "nbt_" is a v2
// token ("Authorization: Bearer nbt_<key>.<secret>"), anything else a v1
// token ("Authorization: Token <40 hex>"). Read-only tokens get 403 on
// POST, PATCH, PUT and DELETE.
func (s *Server) AddToken(token string, writeEnabled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[token] = tokenInfo{writeEnabled: writeEnabled, v2: strings.HasPrefix(token, v2TokenPrefix)}
}

// RemoveToken revokes an API token, as an administrator deleting it.
func (s *Server) RemoveToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, token)
}

// authenticate returns "" when the request may proceed, otherwise the detail
// of the 403. As on NetBox 4.7.3, "Token" and "Bearer" both introduce a
// token and the token itself picks its version: "nbt_…" is v2, anything
// else v1. Other schemes are ignored, leaving the request anonymous (and
// LOGIN_REQUIRED rejects it).
func (s *Server) authenticate(r *http.Request) string {
	fields := strings.Fields(r.Header.Get("Authorization"))
	if len(fields) == 0 {
		return msgNotAuthenticated
	}
	switch strings.ToLower(fields[0]) {
	case "token", "bearer":
	default:
		return msgNotAuthenticated
	}
	switch {
	case len(fields) == 1:
		return "Invalid token header. No credentials provided."
	case len(fields) > 2:
		return "Invalid token header. Token string should not contain spaces."
	}
	v2 := strings.HasPrefix(fields[1], v2TokenPrefix)
	s.mu.Lock()
	tok, ok := s.tokens[fields[1]]
	s.mu.Unlock()
	if !ok {
		if v2 {
			return "Invalid v2 token"
		}
		return "Invalid v1 token"
	}
	if !tok.writeEnabled && !safeMethod(r.Method) {
		return msgNoPermission
	}
	return ""
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}
