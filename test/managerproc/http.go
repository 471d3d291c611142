package managerproc

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ContainerArgs are a container's arguments as the kubelet passes them:
// $(VAR) expanded from the container's literal environment. A reference to
// a variable the container does not define is an error (the kubelet would
// leave it unexpanded).
func ContainerArgs(c corev1.Container) ([]string, error) {
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	var out []string
	var missing []string
	for _, a := range c.Args {
		out = append(out, ref.ReplaceAllStringFunc(a, func(m string) string {
			name := ref.FindStringSubmatch(m)[1]
			v, ok := env[name]
			if !ok {
				missing = append(missing, fmt.Sprintf("argument %q refers to $(%s), which the container does not define", a, name))
			}
			return v
		}))
	}
	if len(missing) > 0 {
		return out, fmt.Errorf("%s", strings.Join(missing, "; "))
	}
	return out, nil
}

// Get GETs url, with a bearer token when one is given, and returns the
// status code and the body.
func Get(ctx context.Context, c *http.Client, url, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body)), err
}
