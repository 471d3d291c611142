package wapisim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// The request object (WAPI reference, "request : WAPI handler object"):
// POST /wapi/vX/request with one operation (a JSON object: "single object
// body request") or a list of them ("multiple object body request"). Each
// operation names a method (GET, POST, PUT, DELETE, or STATE:ASSIGN and
// STATE:DISPLAY in a list), an object (a type, or a reference), data (the
// body of the plain call; for GET, its search fields, as in the reference's
// examples) and args (what the plain call would carry in its URI:
// _return_fields, _max_results, search arguments ...). A list may also give
// enable_substitution, assign_state and discard per operation: STATE:ASSIGN
// sets variables, assign_state saves fields of an operation's result
// ("_ref", a field, "*EA" for an attribute's value; a search's first
// object), enable_substitution replaces ##STATE:name:## in the object, data
// and args, and STATE:DISPLAY answers the variables.
//
// The operations run in order in one database transaction: if one fails,
// none is applied, and the answer is the failing operation's error. A
// single operation is answered as the plain call would be; a list with a
// JSON list of the results of the operations not discarded (200).
//
// Best guesses, as the reference does not say: the status of a list's
// answer (200), that GET search fields may also come in args, the error
// texts of malformed bodies, and that a read-only user may send a request
// made only of GETs (the reader gets httpd's 403 page otherwise, as for a
// plain write).

const typeRequest = "request"

// requestOp is one operation of a request object.
type requestOp struct {
	Method             string            `json:"method"`
	Object             string            `json:"object"`
	Data               map[string]any    `json:"data"`
	Args               map[string]any    `json:"args"`
	EnableSubstitution bool              `json:"enable_substitution"`
	AssignState        map[string]string `json:"assign_state"`
	Discard            bool              `json:"discard"`
}

const (
	methodStateAssign  = "STATE:ASSIGN"
	methodStateDisplay = "STATE:DISPLAY"
)

// serveRequestObject answers POST <version>/request.
func (s *Server) serveRequestObject(w http.ResponseWriter, r *http.Request, u user, raw []byte) int {
	if r.Method != http.MethodPost {
		// "The object supports only the POST method" (WAPI reference).
		return writeResponse(w, errResponse(errProto("Method %s not allowed for object request", r.Method)))
	}
	if len(r.URL.Query()) > 0 {
		// "... and does not support URI arguments" (WAPI reference).
		return writeResponse(w, errResponse(errProto("The request object does not support URI arguments")))
	}
	ops, single, werr := parseRequestBody(raw)
	if werr != nil {
		return writeResponse(w, errResponse(*werr))
	}
	for _, op := range ops {
		typ, ref := splitObject(op.Object)
		if !strings.HasPrefix(op.Method, "STATE:") && !u.may(op.Method, typ, ref) {
			return writeForbidden(w, r)
		}
	}
	s.mu.Lock()
	resp, allocs := s.runRequest(r, u, ops, single)
	var created []Object
	hook := s.onAlloc
	if resp.status < 300 && hook != nil {
		for _, o := range allocs {
			created = append(created, s.db.export(o))
		}
	}
	s.mu.Unlock()
	for _, o := range created {
		hook(o)
	}
	return writeResponse(w, resp)
}

// parseRequestBody decodes one operation or a list of them.
func parseRequestBody(raw []byte) ([]requestOp, bool, *wapiError) {
	trimmed := bytes.TrimSpace(raw)
	single := len(trimmed) > 0 && trimmed[0] == '{'
	if !single && (len(trimmed) == 0 || trimmed[0] != '[') {
		return nil, false, ptr(errProto("Invalid JSON in request body"))
	}
	var items []json.RawMessage
	if single {
		items = []json.RawMessage{trimmed}
	} else if err := json.Unmarshal(trimmed, &items); err != nil {
		return nil, false, ptr(errProto("Invalid JSON in request body"))
	}
	if len(items) == 0 {
		// Best guess text.
		return nil, false, ptr(errProto("The request object needs at least one operation"))
	}
	ops := make([]requestOp, 0, len(items))
	for _, item := range items {
		op, werr := parseRequestOp(item, single)
		if werr != nil {
			return nil, false, werr
		}
		ops = append(ops, op)
	}
	return ops, single, nil
}

// parseRequestOp decodes one operation, refusing fields the request object
// does not document (the list-only ones in a single operation).
func parseRequestOp(raw json.RawMessage, single bool) (requestOp, *wapiError) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return requestOp{}, ptr(errProto("Invalid JSON in request body"))
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		switch k {
		case "method", "object", "data", "args":
		case "enable_substitution", "assign_state", "discard":
			if single {
				return requestOp{}, ptr(errUnknownField(k))
			}
		default:
			return requestOp{}, ptr(errUnknownField(k))
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var op requestOp
	if err := dec.Decode(&op); err != nil {
		return requestOp{}, ptr(errProto("Invalid JSON in request body: %v", err))
	}
	switch op.Method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete:
		if op.Object == "" {
			return requestOp{}, ptr(errRequired("object"))
		}
	case methodStateAssign, methodStateDisplay:
		if single {
			// "Only HTTP methods (GET, PUT, DELETE and POST) are valid
			// methods for the single object body requests."
			return requestOp{}, ptr(errInvalidValue("method", op.Method))
		}
	case "":
		return requestOp{}, ptr(errRequired("method"))
	default:
		return requestOp{}, ptr(errInvalidValue("method", op.Method))
	}
	return op, nil
}

func splitObject(object string) (typ, ref string) {
	if t, _, isRef := strings.Cut(object, "/"); isRef {
		return t, object
	}
	return object, ""
}

// requestRun is the state of one request object while it runs.
type requestRun struct {
	s       *Server
	r       *http.Request
	user    user
	state   map[string]any
	pending []netip.Addr
	allocs  []*object
}

// runRequest runs the operations in order as one transaction; the caller
// holds s.mu. It returns the answer and the objects created with a
// next-available address (none when the request failed).
func (s *Server) runRequest(r *http.Request, u user, ops []requestOp, single bool) (response, []*object) {
	before := s.db
	if slices.ContainsFunc(ops, func(op requestOp) bool { return op.Method != http.MethodGet && !strings.HasPrefix(op.Method, "STATE:") }) {
		before = s.db.snapshot()
	}
	run := &requestRun{s: s, r: r, user: u, state: map[string]any{}}
	results := []any{}
	for _, op := range ops {
		resp := run.do(op)
		if resp.status >= 300 {
			// All or nothing: the earlier operations are undone.
			s.db = before
			return resp, nil
		}
		if single {
			return resp, run.allocs
		}
		// STATE:ASSIGN has no result of its own (the reference's example).
		if !op.Discard && op.Method != methodStateAssign {
			results = append(results, resp.body)
		}
	}
	return response{http.StatusOK, results}, run.allocs
}

// do runs one operation.
func (run *requestRun) do(op requestOp) response {
	if op.EnableSubstitution {
		op = run.substitute(op)
	}
	switch op.Method {
	case methodStateAssign:
		maps.Copy(run.state, op.Data)
		return response{http.StatusOK, maps.Clone(run.state)}
	case methodStateDisplay:
		return response{http.StatusOK, maps.Clone(run.state)}
	}
	typ, ref := splitObject(op.Object)
	if typ == typeRequest || !knownType(typ) {
		return errResponse(errUnknownObjectType(typ))
	}
	c := &request{s: run.s, r: run.r, user: run.user, typ: typ, ref: ref, query: url.Values{}, pending: run.pending}
	for k, v := range op.Args {
		addQuery(c.query, k, v)
	}
	if op.Method == http.MethodGet {
		for k, v := range op.Data {
			addQuery(c.query, k, v)
		}
	} else if op.Data != nil {
		c.body, _ = json.Marshal(op.Data)
	}
	resp := c.handle(op.Method)
	// Addresses taken by this operation stay taken for the next ones.
	run.pending = c.pending
	if resp.status >= 300 {
		return resp
	}
	run.allocs = append(run.allocs, c.allocs...)
	if werr := run.assign(op.AssignState, resp.body); werr != nil {
		return errResponse(*werr)
	}
	return resp
}

// addQuery adds an argument as it would appear in a URI: lists repeat it.
func addQuery(q url.Values, k string, v any) {
	if list, ok := v.([]any); ok {
		for _, x := range list {
			q.Add(k, eaString(x))
		}
		return
	}
	q.Add(k, eaString(v))
}

// assign saves fields of an operation's result in the request state: a
// field name, "_ref", or "*Name" for an extensible attribute's value. A
// search's result is its first object.
func (run *requestRun) assign(fields map[string]string, result any) *wapiError {
	if len(fields) == 0 {
		return nil
	}
	if list, ok := result.([]map[string]any); ok {
		if len(list) == 0 {
			// Best guess text.
			return ptr(errProto("Cannot assign state: the operation returned no object"))
		}
		result = list[0]
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		v, ok := resultField(result, fields[name])
		if !ok {
			// Best guess text.
			return ptr(errProto("Cannot assign state %s: the result has no field %s", name, fields[name]))
		}
		run.state[name] = v
	}
	return nil
}

func resultField(result any, field string) (any, bool) {
	switch r := result.(type) {
	case string:
		return r, field == "_ref"
	case map[string]any:
		if ea, isEA := strings.CutPrefix(field, "*"); isEA {
			eas, _ := r["extattrs"].(map[string]any)
			v, ok := eas[ea].(map[string]any)
			if !ok {
				return nil, false
			}
			return v["value"], true
		}
		v, ok := r[field]
		return v, ok
	}
	return nil, false
}

// substitute replaces ##STATE:name:## in the operation's object, data and
// args with values of the request state.
func (run *requestRun) substitute(op requestOp) requestOp {
	op.Object, _ = run.substituteValue(op.Object).(string)
	op.Data, _ = run.substituteValue(op.Data).(map[string]any)
	op.Args, _ = run.substituteValue(op.Args).(map[string]any)
	return op
}

func (run *requestRun) substituteValue(v any) any {
	switch x := v.(type) {
	case string:
		for name, val := range run.state {
			token := "##STATE:" + name + ":##"
			if x == token {
				// A whole value keeps its type (a number stays a number).
				return val
			}
			x = strings.ReplaceAll(x, token, fmt.Sprint(val))
		}
		return x
	case map[string]any:
		if x == nil {
			return x
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = run.substituteValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = run.substituteValue(e)
		}
		return out
	}
	return v
}

// snapshot copies the store deeply enough that changes to the copy's
// objects leave the original untouched: what a rolled-back request
// restores.
func (st *store) snapshot() *store {
	out := &store{seq: st.seq, objs: make(map[string]*object, len(st.objs)), pages: maps.Clone(st.pages)}
	for k, o := range st.objs {
		out.objs[k] = o.clone()
	}
	return out
}

func (o *object) clone() *object {
	c := *o
	c.eas = maps.Clone(o.eas)
	c.extra = maps.Clone(o.extra)
	c.aliases = slices.Clone(o.aliases)
	c.v4 = cloneHostAddrs(o.v4)
	c.v6 = cloneHostAddrs(o.v6)
	return &c
}

func cloneHostAddrs(in []*hostAddr) []*hostAddr {
	if in == nil {
		return nil
	}
	out := make([]*hostAddr, len(in))
	for i, a := range in {
		c := *a
		out[i] = &c
	}
	return out
}
