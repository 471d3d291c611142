package netboxsim

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// reqCtx is one API request being handled under the server lock.
type reqCtx struct {
	s     *Server
	r     *http.Request
	raw   []byte
	id    string // path parameter
	rend  renderer
	after []func() // run after the lock is released
	// etag is the ETag header of the answer, "" for none.
	etag string
}

func (c *reqCtx) st() *store { return c.s.db }

// body decodes the request like DRF's JSONParser: an empty body, or one
// without Content-Type, is an empty dict.
//
// A chunked body (no Content-Length) reads as empty too: Django under a WSGI
// server such as gunicorn sees no CONTENT_LENGTH and reads nothing, as seen
// on NetBox 4.7.3.
func (c *reqCtx) body() (any, *response) {
	ct := c.r.Header.Get("Content-Type")
	if len(c.raw) == 0 || ct == "" || c.r.ContentLength < 0 {
		return map[string]any{}, nil
	}
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		r := errDetail(http.StatusUnsupportedMediaType, fmt.Sprintf("Unsupported media type \"%s\" in request.", ct))
		return nil, &r
	}
	dec := json.NewDecoder(bytes.NewReader(c.raw))
	var v any
	if err := dec.Decode(&v); err != nil {
		off := len(c.raw)
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = int(se.Offset) - 1
		}
		r := errDetail(http.StatusBadRequest, "JSON parse error - "+pyJSONError("Expecting value", c.raw, off))
		return nil, &r
	}
	if rest := bytes.TrimSpace(c.raw[dec.InputOffset():]); len(rest) > 0 {
		off := len(c.raw) - len(bytes.TrimLeft(c.raw[dec.InputOffset():], " \t\r\n"))
		r := errDetail(http.StatusBadRequest, "JSON parse error - "+pyJSONError("Extra data", c.raw, off))
		return nil, &r
	}
	return v, nil
}

// pyJSONError words a decoding error like Python's json module.
func pyJSONError(msg string, raw []byte, off int) string {
	off = max(0, min(off, len(raw)))
	line := 1 + bytes.Count(raw[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(raw[:off], '\n')
	return fmt.Sprintf("%s: line %d column %d (char %d)", msg, line, col, off)
}

// objectID parses the path ID; DRF answers "Not found." when it is not an
// integer and "No <Model> matches the given query." when nothing has it.
func (c *reqCtx) objectID() (int32, bool) {
	n, err := strconv.ParseInt(c.id, 10, 32)
	return int32(n), err == nil
}

func notFound(model string) response {
	return errDetail(http.StatusNotFound, fmt.Sprintf("No %s matches the given query.", model))
}

// getOne implements a detail GET.
func getOne[T any](c *reqCtx, m map[int32]*T, model string, render func(*T) any) response {
	id, ok := c.objectID()
	if !ok {
		return errDetail(http.StatusNotFound, "Not found.")
	}
	obj, ok := m[id]
	if !ok {
		return notFound(model)
	}
	return response{http.StatusOK, render(obj)}
}

// Pagination follows OptionalLimitOffsetPagination with PAGINATE_COUNT=50
// and MAX_PAGE_SIZE=1000.
const (
	paginateCount = 50
	maxPageSize   = 1000
)

func pageLimit(q url.Values, maxPage int) int {
	if maxPage <= 0 {
		maxPage = maxPageSize
	}
	v, ok := q["limit"]
	if !ok {
		return min(paginateCount, maxPage)
	}
	n, err := strconv.Atoi(strings.TrimSpace(v[0]))
	switch {
	case err != nil || n < 0:
		return min(paginateCount, maxPage)
	case n == 0:
		return maxPage
	}
	return min(n, maxPage)
}

// ordered applies the list's ordering parameter where it orders by ID
// ("id" or "-id"), as DRF's OrderingFilter does; without it, or for other
// fields, the model's own ordering stands.
func ordered[T any](c *reqCtx, items []T, id func(T) int32) []T {
	switch c.r.URL.Query().Get("ordering") {
	case "id":
		slices.SortStableFunc(items, func(a, b T) int { return cmp.Compare(id(a), id(b)) })
	case "-id":
		slices.SortStableFunc(items, func(a, b T) int { return cmp.Compare(id(b), id(a)) })
	}
	return items
}

func paginate[T any](c *reqCtx, items []T, render func(T) any) response {
	q := c.r.URL.Query()
	limit := pageLimit(q, c.s.maxPageSize)
	offset, err := strconv.Atoi(q.Get("offset"))
	if err != nil || offset < 0 {
		offset = 0
	}
	page := pageJSON{Count: len(items), Results: []any{}}
	for i := offset; i < len(items) && i < offset+limit; i++ {
		page.Results = append(page.Results, render(items[i]))
	}
	// DRF rewrites the request URL: limit and offset replaced, keys sorted.
	link := func(off int, withOffset bool) *string {
		v := c.r.URL.Query()
		v.Set("limit", strconv.Itoa(limit))
		v.Del("offset")
		if withOffset {
			v.Set("offset", strconv.Itoa(off))
		}
		s := c.rend.base + c.r.URL.Path + "?" + v.Encode()
		return &s
	}
	if offset+limit < len(items) {
		page.Next = link(offset+limit, true)
	}
	if offset > 0 {
		page.Previous = link(offset-limit, offset-limit > 0)
	}
	return response{http.StatusOK, page}
}

// fieldErrors is a serializer error body: field name to messages.
type fieldErrors map[string][]string

func (e fieldErrors) add(field, msg string) { e[field] = append(e[field], msg) }

func badRequest(body any) response { return response{http.StatusBadRequest, body} }

// pyRepr renders a JSON value as Python's repr() would, since NetBox puts
// reprs of request data into some error messages.
func pyRepr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case string:
		if strings.Contains(x, "'") && !strings.Contains(x, `"`) {
			return `"` + x + `"`
		}
		return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(x) + "'"
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyRepr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = pyRepr(k) + ": " + pyRepr(x[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}

// pyStr is Python's str(): strings bare, everything else as repr.
func pyStr(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return pyRepr(v)
}

// pyTypeName names a JSON value's Python type, for DRF's type errors.
func pyTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case float64:
		if f := v.(float64); f == math.Trunc(f) {
			return "int"
		}
		return "float"
	case string:
		return "str"
	case []any:
		return "list"
	case map[string]any:
		return "dict"
	}
	return fmt.Sprintf("%T", v)
}
