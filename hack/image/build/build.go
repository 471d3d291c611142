// Package build assembles the manager's container image without a Docker
// engine: it cross-compiles the manager exactly as `make build` does and
// writes a multi-platform OCI image index.
//
// The image starts from scratch (an empty base), not from
// gcr.io/distroless/static:nonroot as the Dockerfile does: no container
// registry is reachable from the machines that build it, so the base
// cannot be pulled. Instead the image recreates what that base gives a
// static Go binary: /etc/passwd and /etc/group with root (0) and nonroot
// (65532, home /home/nonroot), the CA bundle at
// /etc/ssl/certs/ca-certificates.crt (the manager verifies NetBox and
// Infoblox TLS), /tmp (1777) and /home/nonroot. There is no shell and
// nothing else.
//
// The output is deterministic: every tar entry has a fixed mtime (the
// Created time), explicit uid/gid and a sorted position, and the configs
// carry the same fixed Created time, so equal inputs give equal digests.
package build

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image metadata.
const (
	Source      = "https://github.com/ipam-bridge/cluster-api-ipam-provider-bridge"
	Title       = "cluster-api-ipam-provider-bridge"
	Description = "Cluster API IPAM provider for NetBox and Infoblox"
	BaseName    = "scratch"

	// User is the config's user: distroless's nonroot, by number.
	User = "65532:65532"
	// Entrypoint is the manager binary's path in the image.
	Entrypoint = "/manager"
	// CABundlePath is where the image holds the CA bundle.
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"

	NonrootUID = 65532
)

// Annotation and label keys.
const (
	AnnotationRevision    = "org.opencontainers.image.revision"
	AnnotationVersion     = "org.opencontainers.image.version"
	AnnotationSource      = "org.opencontainers.image.source"
	AnnotationTitle       = "org.opencontainers.image.title"
	AnnotationDescription = "org.opencontainers.image.description"
	AnnotationBaseName    = "org.opencontainers.image.base.name"
	AnnotationRefName     = "org.opencontainers.image.ref.name"
	AnnotationImageName   = "io.containerd.image.name"
)

// Passwd and Group are the image's /etc/passwd and /etc/group: the root and
// nonroot entries of distroless/static:nonroot.
const (
	Passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	Group = "root:x:0:\n" +
		"nonroot:x:65532:\n"
)

// Env is the config's environment, as distroless/static sets it.
var Env = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"SSL_CERT_FILE=" + CABundlePath,
}

// DefaultPlatforms are the platforms the release image is built for.
var DefaultPlatforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64", Variant: "v8"},
}

// Options say what to build.
type Options struct {
	// Root is the main module's directory (the repository root).
	Root string
	// Version ends up in main.version and the version label.
	Version string
	// Revision is the git commit, for the revision label.
	Revision string
	// Platforms to build; DefaultPlatforms when empty.
	Platforms []v1.Platform
	// CABundle is the path of the CA bundle to copy into the image.
	CABundle string
	// Created is the configs' creation time and every file's mtime; the
	// Unix epoch when zero.
	Created time.Time
	// Go is the go command; "go" when empty.
	Go string
	// Log, when set, gets progress lines and the go build output.
	Log io.Writer
}

func (o Options) created() time.Time {
	if o.Created.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return o.Created.UTC().Truncate(time.Second)
}

func (o Options) platforms() []v1.Platform {
	if len(o.Platforms) == 0 {
		return DefaultPlatforms
	}
	return o.Platforms
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// ParsePlatforms parses a comma-separated list of os/arch[/variant]; arm64
// gets the variant v8 when it has none. Only linux is supported.
func ParsePlatforms(s string) ([]v1.Platform, error) {
	var ps []v1.Platform
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := v1.ParsePlatform(f)
		if err != nil {
			return nil, err
		}
		if p.OS != "linux" || p.Architecture == "" || p.OSVersion != "" {
			return nil, fmt.Errorf("platform %q: want linux/<arch>[/<variant>]", f)
		}
		if p.Architecture == "arm64" && p.Variant == "" {
			p.Variant = "v8"
		}
		if slices.ContainsFunc(ps, p.Equals) {
			return nil, fmt.Errorf("platform %q given twice", f)
		}
		ps = append(ps, *p)
	}
	if len(ps) == 0 {
		return nil, errors.New("no platforms")
	}
	return ps, nil
}

// goEnv is the GOOS/GOARCH/GOARM… of a platform.
func goEnv(p v1.Platform) ([]string, error) {
	env := []string{"GOOS=" + p.OS, "GOARCH=" + p.Architecture}
	switch {
	case p.Variant == "":
	case p.Architecture == "arm64" && p.Variant == "v8":
	case p.Architecture == "arm" && len(p.Variant) == 2 && p.Variant[0] == 'v':
		env = append(env, "GOARM="+p.Variant[1:])
	case p.Architecture == "amd64" && len(p.Variant) == 2 && p.Variant[0] == 'v':
		env = append(env, "GOAMD64="+p.Variant)
	default:
		return nil, fmt.Errorf("platform %s: unsupported variant", p)
	}
	return env, nil
}

// BuildArgs are the arguments of `go` that build the manager into out: the
// Makefile's build target (CGO_ENABLED=0 is set in the environment).
func BuildArgs(version, out string) []string {
	return []string{"build", "-trimpath", "-ldflags", "-s -w -X main.version=" + version, "-o", out, "./cmd"}
}

// Compile cross-compiles the manager for each platform into dir and returns
// the binaries' paths in the order of the platforms. The builds run one
// after the other in o.Root, with the environment of this process plus
// CGO_ENABLED=0 and the platform's GOOS/GOARCH.
func Compile(ctx context.Context, o Options, dir string) ([]string, error) {
	goCmd := o.Go
	if goCmd == "" {
		goCmd = "go"
	}
	var bins []string
	for _, p := range o.platforms() {
		env, err := goEnv(p)
		if err != nil {
			return nil, err
		}
		bin := filepath.Join(dir, "manager-"+strings.ReplaceAll(p.String(), "/", "-"))
		args := BuildArgs(o.Version, bin)
		o.logf("building the manager for %s: CGO_ENABLED=0 %s go build -trimpath -ldflags %q -o %s ./cmd", p, strings.Join(env, " "), args[3], bin)
		start := time.Now()
		cmd := exec.CommandContext(ctx, goCmd, args...)
		cmd.Dir = o.Root
		cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0"), env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("go build for %s: %w\n%s", p, err, out.Bytes())
		}
		if o.Log != nil && out.Len() > 0 {
			o.Log.Write(out.Bytes())
		}
		o.logf("built %s in %s", p, time.Since(start).Round(time.Second))
		bins = append(bins, bin)
	}
	return bins, nil
}

// Build compiles the manager for every platform and assembles the image
// index (Compile, then Assemble).
func Build(ctx context.Context, o Options) (v1.ImageIndex, error) {
	if o.Version == "" {
		return nil, errors.New("no version")
	}
	dir, err := os.MkdirTemp("", "manager-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bins, err := Compile(ctx, o, dir)
	if err != nil {
		return nil, err
	}
	// Assemble reads the binaries into memory, so dir can go afterwards.
	return Assemble(o, bins)
}

// Labels are the config labels, also the index's annotations.
func Labels(version, revision string) map[string]string {
	return map[string]string{
		AnnotationRevision:    revision,
		AnnotationVersion:     version,
		AnnotationSource:      Source,
		AnnotationTitle:       Title,
		AnnotationDescription: Description,
		AnnotationBaseName:    BaseName,
	}
}

// Assemble builds the image index from already built binaries, one per
// platform, in the order of o.Platforms.
func Assemble(o Options, binaries []string) (v1.ImageIndex, error) {
	platforms := o.platforms()
	if len(binaries) != len(platforms) {
		return nil, fmt.Errorf("%d binaries for %d platforms", len(binaries), len(platforms))
	}
	if o.Revision == "" {
		o.Revision = "unknown"
	}
	caPath := o.CABundle
	if caPath == "" {
		caPath = CABundlePath
	}
	ca, err := os.ReadFile(caPath)
	if err != nil {
		return nil, fmt.Errorf("reading the CA bundle: %w", err)
	}
	if !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caPath)
	}
	created := o.created()
	// The base layer is the same for every platform, so its blob is shared.
	base, err := layer(created, baseFiles(ca))
	if err != nil {
		return nil, err
	}
	labels := Labels(o.Version, o.Revision)

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for i, p := range platforms {
		bin, err := os.ReadFile(binaries[i])
		if err != nil {
			return nil, err
		}
		mgr, err := layer(created, []file{{name: "manager", mode: 0o755, data: bin}})
		if err != nil {
			return nil, err
		}
		img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		img, err = mutate.Append(img,
			mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
				Created:   v1.Time{Time: created},
				CreatedBy: "hack/image: /etc/passwd, /etc/group, " + CABundlePath + ", /tmp, /home/nonroot (what distroless/static:nonroot gives)",
				Comment:   "scratch base",
			}},
			mutate.Addendum{Layer: mgr, MediaType: types.OCILayer, History: v1.History{
				Created:   v1.Time{Time: created},
				CreatedBy: "COPY manager /manager # CGO_ENABLED=0 go build -trimpath -ldflags \"-s -w -X main.version=" + o.Version + "\" ./cmd",
			}},
		)
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.Created = v1.Time{Time: created}
		cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
		cf.Config = v1.Config{
			User:       User,
			Entrypoint: []string{Entrypoint},
			WorkingDir: "/",
			Env:        slices.Clone(Env),
			Labels:     maps.Clone(labels),
		}
		img, err = mutate.ConfigFile(img, cf)
		if err != nil {
			return nil, err
		}
		platform := p
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &platform},
		})
	}
	return mutate.Annotations(idx, labels).(v1.ImageIndex), nil
}

// file is one entry of a layer: a regular file, or a directory when dir is set.
type file struct {
	name     string // relative, slash-separated; directories without a trailing slash
	mode     int64  // permission bits plus the sticky bit
	dir      bool
	uid, gid int
	data     []byte
}

func baseFiles(ca []byte) []file {
	return []file{
		{name: "etc", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte(Passwd)},
		{name: "etc/group", mode: 0o644, data: []byte(Group)},
		{name: "etc/ssl", mode: 0o755, dir: true},
		{name: "etc/ssl/certs", mode: 0o755, dir: true},
		{name: strings.TrimPrefix(CABundlePath, "/"), mode: 0o644, data: ca},
		{name: "home", mode: 0o755, dir: true},
		{name: "home/nonroot", mode: 0o700, dir: true, uid: NonrootUID, gid: NonrootUID},
		{name: "tmp", mode: 0o1777, dir: true},
	}
}

// layer writes files into a deterministic tar (sorted, fixed mtime, numeric
// owners) and returns it as a gzip-compressed OCI layer.
func layer(mtime time.Time, files []file) (v1.Layer, error) {
	files = slices.Clone(files)
	sort.Slice(files, func(i, j int) bool { return tarName(files[i]) < tarName(files[j]) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name:    tarName(f),
			Mode:    f.mode,
			Uid:     f.uid,
			Gid:     f.gid,
			Uname:   owner(f.uid),
			Gname:   owner(f.gid),
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		if f.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestCompression), tarball.WithCompressedCaching)
}

func tarName(f file) string {
	if f.dir {
		return f.name + "/"
	}
	return f.name
}

func owner(id int) string {
	switch id {
	case 0:
		return "root"
	case NonrootUID:
		return "nonroot"
	}
	return ""
}

// TagOf returns the tag of an image reference, which must have one.
func TagOf(ref string) (string, error) {
	r, err := name.ParseReference(ref, name.StrictValidation)
	if err != nil {
		return "", err
	}
	t, ok := r.(name.Tag)
	if !ok {
		return "", fmt.Errorf("image reference %q has no tag", ref)
	}
	return t.TagStr(), nil
}

// WriteLayout writes idx as an OCI image layout in dir, replacing the layout
// there (dir must be missing, empty or an OCI layout). index.json holds one
// descriptor, of idx, annotated with ref's tag (org.opencontainers.image.ref.name)
// and ref itself (io.containerd.image.name).
func WriteLayout(dir string, idx v1.ImageIndex, ref string) error {
	tag, err := TagOf(ref)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	case len(entries) > 0:
		if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
			return fmt.Errorf("%s is neither empty nor an OCI layout; not replacing it", dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		AnnotationRefName:   tag,
		AnnotationImageName: ref,
	})); err != nil {
		return err
	}
	// go-containerregistry writes blobs 0600 and index.json 0755 (less the
	// umask); make every file 0644 so that other users can push the layout.
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chmod(p, 0o644)
	})
}

// WriteTar writes the OCI layout in dir as a tar at out (an oci-archive:
// the layout's files at the archive's root), deterministically: sorted
// entries, the given mtime, owner 0.
func WriteTar(dir, out string, mtime time.Time) error {
	if mtime.IsZero() {
		mtime = time.Unix(0, 0)
	}
	mtime = mtime.UTC().Truncate(time.Second)
	var names []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names) // WalkDir's lexical order per directory; sort the whole paths too
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, n := range names {
		fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(n)))
		if err != nil {
			return err
		}
		h := &tar.Header{Name: n, ModTime: mtime, Format: tar.FormatPAX, Uname: "root", Gname: "root"}
		switch {
		case fi.IsDir():
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, n+"/", 0o755
		case fi.Mode().IsRegular():
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, fi.Size()
		default:
			return fmt.Errorf("%s: not a regular file or directory", path.Join(dir, n))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			src, err := os.Open(filepath.Join(dir, filepath.FromSlash(n)))
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, src)
			src.Close()
			if err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
