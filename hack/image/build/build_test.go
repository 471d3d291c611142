package build_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"debug/elf"
	"encoding/pem"
	"errors"
	"io"
	"maps"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/hack/image/build"
)

const (
	testVersion  = "v9.8.7-imagetest"
	testRevision = "0123456789abcdef0123456789abcdef01234567"
	testRef      = "ghcr.io/ipam-bridge/cluster-api-ipam-provider-bridge:" + testVersion
)

// wantFiles is every entry of the image's filesystem (directories end in /).
var wantFiles = []string{
	"etc/",
	"etc/group",
	"etc/passwd",
	"etc/ssl/",
	"etc/ssl/certs/",
	"etc/ssl/certs/ca-certificates.crt",
	"home/",
	"home/nonroot/",
	"manager",
	"tmp/",
}

type entry struct {
	hdr  *tar.Header
	data []byte
}

// readFS flattens the image's layers (mutate.Extract) into a map by path,
// without leading "/" or "./", directories with a trailing "/".
func readFS(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	fs := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		name := strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/")
		if h.Typeflag == tar.TypeDir && !strings.HasSuffix(name, "/") {
			name += "/"
		}
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		fs[name] = entry{hdr: h, data: data}
	}
	return fs
}

// unpack writes the filesystem under dir (ownership is not kept).
func unpack(t *testing.T, fs map[string]entry, dir string) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(fs)) {
		e := fs[name]
		p := filepath.Join(dir, filepath.FromSlash(name))
		switch e.hdr.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(p, 0o755))
		case tar.TypeReg:
			require.NoError(t, os.WriteFile(p, e.data, os.FileMode(e.hdr.Mode).Perm()))
		default:
			t.Fatalf("%s: unexpected type %c", name, e.hdr.Typeflag)
		}
	}
}

type logWriter struct{ t *testing.T }

// testCABundle is a PEM bundle of one self-signed CA certificate.
func testCABundle(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "image test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestImage builds the manager for linux/amd64 and linux/arm64 (two go
// builds), writes the OCI layout, reads it back from disk and checks every
// image; the one of this machine's architecture is unpacked and run.
// Run it under the shared build lock; it is not taken here.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: not building the manager")
	}
	// A CA bundle of the test's own: the host's may be missing (make test
	// does not install one), and the test must not skip for it.
	caBundle := filepath.Join(t.TempDir(), "ca-certificates.crt")
	require.NoError(t, os.WriteFile(caBundle, testCABundle(t), 0o600))
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "cmd", "main.go"))

	opts := build.Options{
		Root:      root,
		Version:   testVersion,
		Revision:  testRevision,
		Platforms: build.DefaultPlatforms,
		CABundle:  caBundle,
		Log:       logWriter{t},
	}
	start := time.Now()
	built, err := build.Build(t.Context(), opts)
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "layout")
	require.NoError(t, build.WriteLayout(dir, built, testRef))
	t.Logf("built and wrote the layout in %s", time.Since(start).Round(time.Second))

	// Everything below reads the layout back from disk.
	top, err := layout.ImageIndexFromPath(dir)
	require.NoError(t, err)
	topManifest, err := top.IndexManifest()
	require.NoError(t, err)
	require.Len(t, topManifest.Manifests, 1, "index.json must hold one descriptor: the image index")
	desc := topManifest.Manifests[0]
	assert.Equal(t, types.OCIImageIndex, desc.MediaType)
	assert.Equal(t, map[string]string{
		"org.opencontainers.image.ref.name": testVersion,
		"io.containerd.image.name":          testRef,
	}, desc.Annotations)

	idx, err := top.ImageIndex(desc.Digest)
	require.NoError(t, err)
	builtDigest, err := built.Digest()
	require.NoError(t, err)
	assert.Equal(t, builtDigest, desc.Digest)
	// Digests, sizes, diff IDs and media types agree throughout.
	require.NoError(t, validate.Index(idx))
	im, err := idx.IndexManifest()
	require.NoError(t, err)
	assert.Equal(t, types.OCIImageIndex, im.MediaType)
	assert.Equal(t, testRevision, im.Annotations["org.opencontainers.image.revision"])
	assert.Equal(t, testVersion, im.Annotations["org.opencontainers.image.version"])
	assert.Equal(t, "scratch", im.Annotations["org.opencontainers.image.base.name"])
	assert.Equal(t, build.Source, im.Annotations["org.opencontainers.image.source"])
	require.Len(t, im.Manifests, 2)

	ca, err := os.ReadFile(caBundle)
	require.NoError(t, err)
	epoch := time.Unix(0, 0).UTC()
	managers := map[string][]byte{}

	for _, tc := range []struct {
		platform v1.Platform
		machine  elf.Machine
	}{
		{v1.Platform{OS: "linux", Architecture: "amd64"}, elf.EM_X86_64},
		{v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}, elf.EM_AARCH64},
	} {
		t.Run(tc.platform.String(), func(t *testing.T) {
			i := slices.IndexFunc(im.Manifests, func(d v1.Descriptor) bool {
				return d.Platform != nil && d.Platform.Equals(tc.platform)
			})
			require.GreaterOrEqual(t, i, 0, "the index has no %s manifest: %+v", tc.platform, im.Manifests)
			md := im.Manifests[i]
			assert.Equal(t, types.OCIManifestSchema1, md.MediaType)
			assert.Equal(t, tc.platform.Architecture, md.Platform.Architecture)

			img, err := idx.Image(md.Digest)
			require.NoError(t, err)
			mf, err := img.Manifest()
			require.NoError(t, err)
			assert.Equal(t, types.OCIConfigJSON, mf.Config.MediaType)
			for _, l := range mf.Layers {
				assert.Equal(t, types.OCILayer, l.MediaType)
			}

			cf, err := img.ConfigFile()
			require.NoError(t, err)
			assert.Equal(t, tc.platform.OS, cf.OS)
			assert.Equal(t, tc.platform.Architecture, cf.Architecture)
			assert.Equal(t, tc.platform.Variant, cf.Variant)
			assert.True(t, cf.Created.Time.Equal(epoch), "Created %s", cf.Created)
			assert.Equal(t, "65532:65532", cf.Config.User, "the image must run as nonroot")
			assert.Equal(t, []string{"/manager"}, cf.Config.Entrypoint)
			assert.Empty(t, cf.Config.Cmd)
			assert.Equal(t, "/", cf.Config.WorkingDir)
			assert.Equal(t, testRevision, cf.Config.Labels["org.opencontainers.image.revision"])
			assert.Equal(t, testVersion, cf.Config.Labels["org.opencontainers.image.version"])
			assert.Equal(t, im.Annotations, cf.Config.Labels, "the index's annotations are the labels")

			fs := readFS(t, img)
			assert.Equal(t, wantFiles, slices.Sorted(maps.Keys(fs)), "the image must hold these files and nothing else")
			for _, sh := range []string{"bin/sh", "bin/", "usr/bin/sh", "bin/busybox"} {
				assert.NotContains(t, fs, sh)
			}
			for name, e := range fs {
				assert.True(t, e.hdr.ModTime.Equal(epoch), "%s has mtime %s", name, e.hdr.ModTime)
			}

			mgr := fs["manager"]
			require.NotNil(t, mgr.hdr)
			assert.Equal(t, byte(tar.TypeReg), mgr.hdr.Typeflag)
			assert.Equal(t, int64(0o755), mgr.hdr.Mode)
			assert.Equal(t, 0, mgr.hdr.Uid)
			f, err := elf.NewFile(bytes.NewReader(mgr.data))
			require.NoError(t, err)
			assert.Equal(t, tc.machine, f.Machine)
			for _, p := range f.Progs {
				assert.NotEqual(t, elf.PT_INTERP, p.Type, "the manager must be static")
			}
			managers[tc.platform.String()] = mgr.data

			passwd := string(fs["etc/passwd"].data)
			assert.Equal(t, "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin", line(passwd, 2, "65532"), "/etc/passwd must map 65532 to nonroot")
			assert.Equal(t, "root", strings.Split(line(passwd, 2, "0"), ":")[0])
			assert.Equal(t, "nonroot", strings.Split(line(string(fs["etc/group"].data), 2, "65532"), ":")[0], "/etc/group must map 65532 to nonroot")

			bundle := fs["etc/ssl/certs/ca-certificates.crt"]
			assert.Equal(t, ca, bundle.data, "the CA bundle")
			assert.Equal(t, int64(0o644), bundle.hdr.Mode)
			assert.True(t, x509.NewCertPool().AppendCertsFromPEM(bundle.data), "the CA bundle holds no certificate")

			assert.Equal(t, int64(0o1777), fs["tmp/"].hdr.Mode, "/tmp must be 1777")
			home := fs["home/nonroot/"].hdr
			assert.Equal(t, []int{65532, 65532}, []int{home.Uid, home.Gid}, "/home/nonroot must belong to nonroot")

			if tc.platform.Architecture != runtime.GOARCH || runtime.GOOS != "linux" {
				t.Logf("not running the %s manager on %s/%s", tc.platform, runtime.GOOS, runtime.GOARCH)
				return
			}
			rootfs := t.TempDir()
			unpack(t, fs, rootfs)
			entrypoint := filepath.Join(rootfs, filepath.FromSlash(cf.Config.Entrypoint[0]))
			for _, run := range []struct {
				arg       string
				exitCodes []int // pflag's --help exits 0 (ErrHelp with ExitOnError)
				contains  string
			}{
				{"--version", []int{0}, testVersion},
				{"--help", []int{0}, "--namespace"},
			} {
				t.Run(strings.TrimPrefix(run.arg, "--"), func(t *testing.T) {
					cmd := exec.CommandContext(t.Context(), entrypoint, run.arg)
					cmd.Dir = rootfs
					out, err := cmd.CombinedOutput()
					code := 0
					var exit *exec.ExitError
					if errors.As(err, &exit) {
						code = exit.ExitCode()
					} else {
						require.NoError(t, err)
					}
					assert.Contains(t, run.exitCodes, code, "%s %s exited %d:\n%s", cf.Config.Entrypoint[0], run.arg, code, out)
					assert.Contains(t, string(out), run.contains)
				})
			}
		})
	}

	t.Run("deterministic", func(t *testing.T) {
		// Assembling the same binaries again gives the same index digest.
		require.Len(t, managers, 2)
		var bins []string
		for _, p := range opts.Platforms {
			bin := filepath.Join(t.TempDir(), "manager")
			require.NoError(t, os.WriteFile(bin, managers[p.String()], 0o755))
			bins = append(bins, bin)
		}
		again, err := build.Assemble(opts, bins)
		require.NoError(t, err)
		d, err := again.Digest()
		require.NoError(t, err)
		assert.Equal(t, desc.Digest, d)

		// The tarball of the layout is the same twice and holds every blob.
		a, b := filepath.Join(t.TempDir(), "a.tar"), filepath.Join(t.TempDir(), "b.tar")
		require.NoError(t, build.WriteTar(dir, a, time.Time{}))
		require.NoError(t, build.WriteTar(dir, b, time.Time{}))
		ab, err := os.ReadFile(a)
		require.NoError(t, err)
		bb, err := os.ReadFile(b)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(ab, bb), "the tarball differs between two writes")
		var names []string
		tr := tar.NewReader(bytes.NewReader(ab))
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			names = append(names, h.Name)
		}
		assert.Contains(t, names, "oci-layout")
		assert.Contains(t, names, "index.json")
		assert.Contains(t, names, "blobs/sha256/"+desc.Digest.Hex)
		for _, m := range im.Manifests {
			assert.Contains(t, names, "blobs/sha256/"+m.Digest.Hex)
		}
	})
}

// line returns the line of a colon-separated file whose field (0-based) is value.
func line(file string, field int, value string) string {
	s := bufio.NewScanner(strings.NewReader(file))
	for s.Scan() {
		if f := strings.Split(s.Text(), ":"); len(f) > field && f[field] == value {
			return s.Text()
		}
	}
	return ""
}
