package release

import (
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
)

// stage is one FROM … of a Dockerfile with its instructions.
type stage struct {
	image, name  string
	instructions [][2]string // instruction, arguments
}

// parseDockerfile splits a Dockerfile into stages; continuation lines are
// joined and comments dropped.
func parseDockerfile(t *testing.T, text string) []stage {
	t.Helper()
	var stages []stage
	var logical []string
	var cur strings.Builder
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		logical = append(logical, cur.String())
		cur.Reset()
	}
	for _, l := range logical {
		instr, args, _ := strings.Cut(l, " ")
		instr = strings.ToUpper(instr)
		args = strings.TrimSpace(args)
		if instr == "FROM" {
			fields := strings.Fields(args)
			fields = slices.DeleteFunc(fields, func(f string) bool { return strings.HasPrefix(f, "--") })
			s := stage{image: fields[0]}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				s.name = fields[2]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			require.Contains(t, []string{"ARG"}, instr, "only ARG may precede the first FROM")
			continue
		}
		stages[len(stages)-1].instructions = append(stages[len(stages)-1].instructions, [2]string{instr, args})
	}
	return stages
}

// goBuild is a `go build` command line: its environment assignments, flags
// and package, with -o taken out.
type goBuild struct {
	env   map[string]string
	flags []string
	pkg   string
}

// parseGoBuild finds `go build` in a shell command and splits it into words
// (single and double quotes group; no other shell syntax is expected).
func parseGoBuild(t *testing.T, command string) goBuild {
	t.Helper()
	words := shellWords(t, command)
	i := slices.Index(words, "go")
	require.True(t, i >= 0 && i+1 < len(words) && words[i+1] == "build", "no go build in %q", command)
	b := goBuild{env: map[string]string{}}
	for j := i - 1; j >= 0 && strings.Contains(words[j], "="); j-- {
		k, v, _ := strings.Cut(words[j], "=")
		b.env[k] = v
	}
	rest := words[i+2:]
	for j := 0; j < len(rest); j++ {
		switch w := rest[j]; {
		case w == "-o":
			j++
		case strings.HasPrefix(w, "-"):
			b.flags = append(b.flags, w)
			if w == "-ldflags" || w == "-tags" || w == "-gcflags" {
				j++
				b.flags = append(b.flags, rest[j])
			}
		default:
			b.pkg = w
		}
	}
	return b
}

func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	require.Zero(t, quote, "unbalanced quotes in %q", s)
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

func TestDockerfile(t *testing.T) {
	root := envtestenv.RepoRoot()
	raw, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	require.NoError(t, err)
	stages := parseDockerfile(t, string(raw))
	require.Len(t, stages, 2, "a builder stage and the final stage")
	builder, final := stages[0], stages[1]

	t.Run("builder Go version matches go.mod", func(t *testing.T) {
		image, tag, ok := strings.Cut(builder.image, ":")
		require.True(t, ok, "the builder image %s must be pinned by tag", builder.image)
		require.Equal(t, "golang", image)
		tag, _, _ = strings.Cut(tag, "-") // 1.26.8-trixie
		builderGo, err := version.ParseGeneric(tag)
		require.NoError(t, err, "builder tag %s must name an exact Go version", tag)
		require.Len(t, strings.Split(tag, "."), 3, "builder tag %s must be an exact patch release", tag)

		out, err := exec.Command("go", "mod", "edit", "-json", filepath.Join(root, "go.mod")).Output()
		require.NoError(t, err)
		var mod struct{ Go, Toolchain string }
		require.NoError(t, json.Unmarshal(out, &mod))
		if mod.Toolchain != "" {
			assert.Equal(t, strings.TrimPrefix(mod.Toolchain, "go"), tag, "the builder must use go.mod's toolchain")
			return
		}
		goLine := version.MustParseGeneric(mod.Go)
		assert.Equal(t, []uint{goLine.Major(), goLine.Minor()}, []uint{builderGo.Major(), builderGo.Minor()},
			"the builder's Go %s must be of go.mod's Go %s series", tag, mod.Go)
		assert.True(t, builderGo.AtLeast(goLine), "the builder's Go %s is older than go.mod's go %s", tag, mod.Go)
		if local, err := exec.Command("go", "env", "GOVERSION").Output(); err == nil && strings.TrimSpace(string(local)) != "go"+tag {
			t.Logf("note: local Go is %s, the image builds with go%s", strings.TrimSpace(string(local)), tag)
		}
	})

	t.Run("final stage is distroless nonroot", func(t *testing.T) {
		assert.Regexp(t, `^gcr\.io/distroless/static(-debian\d+)?:nonroot(@sha256:[0-9a-f]{64})?$`, final.image)
		var user, entrypoint string
		for _, in := range final.instructions {
			switch in[0] {
			case "USER":
				user = in[1]
			case "ENTRYPOINT":
				entrypoint = in[1]
			case "RUN":
				t.Errorf("the final stage runs %q: distroless has no shell", in[1])
			}
		}
		assert.Equal(t, "65532:65532", user, "the final stage must run as the nonroot user by number")
		assert.Equal(t, `["/manager"]`, entrypoint)
	})

	t.Run("stage names and COPY --from agree", func(t *testing.T) {
		require.NotEmpty(t, builder.name)
		var build goBuild
		var output string
		for _, in := range builder.instructions {
			if in[0] == "RUN" && strings.Contains(in[1], "go build") {
				build = parseGoBuild(t, in[1])
				words := shellWords(t, in[1])
				output = words[slices.Index(words, "-o")+1]
			}
		}
		require.NotEmpty(t, output, "the builder has no go build -o")
		copied := false
		for _, in := range final.instructions {
			if in[0] != "COPY" || !strings.HasPrefix(in[1], "--from=") {
				continue
			}
			fields := strings.Fields(in[1])
			from := strings.TrimPrefix(fields[0], "--from=")
			assert.Equal(t, builder.name, from, "COPY --from names an unknown stage")
			assert.Equal(t, []string{output, "/manager"}, fields[1:], "the final stage must copy the built binary to /manager")
			copied = true
		}
		assert.True(t, copied, "the final stage copies nothing from the builder")
		assert.Equal(t, "./cmd", build.pkg)
	})

	t.Run("sources the binary needs are copied and not ignored", func(t *testing.T) {
		list := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", "./cmd")
		list.Dir = root
		out, err := list.Output()
		require.NoError(t, err, "go list -deps ./cmd")
		var copied []string
		for _, in := range builder.instructions {
			if in[0] == "COPY" && !strings.HasPrefix(in[1], "--") {
				fields := strings.Fields(in[1])
				copied = append(copied, fields[:len(fields)-1]...)
			}
		}
		ignore, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
		require.NoError(t, err)
		for _, need := range []string{"go.mod", "go.sum"} {
			assert.Contains(t, copied, need)
		}
		for _, dir := range strings.Fields(string(out)) {
			rel, err := filepath.Rel(root, dir)
			require.NoError(t, err)
			top := strings.Split(rel, string(filepath.Separator))[0]
			assert.Contains(t, copied, top+"/", "./cmd imports %s, but the Dockerfile does not copy %s/", rel, top)
			assert.NotRegexp(t, `(?m)^/?`+regexp.QuoteMeta(top)+`/?$`, string(ignore), ".dockerignore excludes %s/, which ./cmd needs", top)
		}
	})

	t.Run("build flags match make build, and the binary is static", func(t *testing.T) {
		const testVersion = "v9.8.7-test"
		var docker goBuild
		for _, in := range builder.instructions {
			if in[0] == "RUN" && strings.Contains(in[1], "go build") {
				docker = parseGoBuild(t, strings.ReplaceAll(in[1], "${VERSION}", testVersion))
				// The image is built for the platform Docker asks for; here, for this one.
				assert.Equal(t, "${TARGETOS}", docker.env["GOOS"])
				assert.Equal(t, "${TARGETARCH}", docker.env["GOARCH"])
				docker.env["GOOS"], docker.env["GOARCH"] = goruntime.GOOS, goruntime.GOARCH
			}
		}
		assert.Equal(t, "0", docker.env["CGO_ENABLED"], "the image's binary must be built without cgo")

		cmd := exec.Command("make", "-s", "-n", "build", "VERSION="+testVersion)
		cmd.Dir = root
		out, err := cmd.Output()
		require.NoError(t, err, "make -n build")
		makeBuild := parseGoBuild(t, strings.TrimSpace(string(out)))
		assert.Equal(t, "0", makeBuild.env["CGO_ENABLED"])
		assert.Equal(t, makeBuild.flags, docker.flags, "the Dockerfile and make build must use the same flags")
		assert.Equal(t, makeBuild.pkg, docker.pkg)
		assert.Contains(t, docker.flags, "-trimpath")
		assert.Contains(t, strings.Join(docker.flags, " "), "-X main.version="+testVersion)

		if testing.Short() {
			t.Skip("-short: not building the binary")
		}
		// Build exactly as the image does. Run the test under the shared build
		// lock (see the Makefile's test-release); it is not taken here.
		bin := filepath.Join(t.TempDir(), "manager")
		args := append([]string{"build"}, docker.flags...)
		args = append(args, "-o", bin, docker.pkg)
		build := exec.Command("go", args...)
		build.Dir = root
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		for k, v := range docker.env {
			build.Env = append(build.Env, k+"="+v)
		}
		out, err = build.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)

		f, err := elf.Open(bin)
		require.NoError(t, err)
		defer f.Close()
		for _, p := range f.Progs {
			assert.NotEqual(t, elf.PT_INTERP, p.Type, "the binary asks for a dynamic loader")
			assert.NotEqual(t, elf.PT_DYNAMIC, p.Type, "the binary has a dynamic section")
		}
		assert.Nil(t, f.Section(".interp"))
		assert.Nil(t, f.Section(".dynamic"))
		libs, err := f.ImportedLibraries()
		require.NoError(t, err)
		assert.Empty(t, libs)

		out, err = exec.Command(bin, "--version").CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Equal(t, testVersion, strings.TrimSpace(string(out)), "--version must print the version set by -ldflags")
	})

	t.Run("make docker-build passes the version", func(t *testing.T) {
		cmd := exec.Command("make", "-s", "-n", "docker-build", "VERSION=v1.2.3", "IMG=example/img:v1.2.3")
		cmd.Dir = root
		out, err := cmd.Output()
		require.NoError(t, err)
		assert.Equal(t, "docker build --build-arg VERSION=v1.2.3 -t example/img:v1.2.3 .", strings.TrimSpace(string(out)))
		assert.Contains(t, string(raw), "ARG VERSION", "the Dockerfile must take the VERSION build argument")
	})
}
