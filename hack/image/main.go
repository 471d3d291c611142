// Command image builds the manager's container image without a Docker
// engine, as a multi-platform OCI image layout:
//
//	cd hack/image && go run . -version v0.1.0 \
//		-ref ghcr.io/ipam-bridge/cluster-api-ipam-provider-bridge:v0.1.0 \
//		-out ../../out/image -tar ../../out/manager-image.tar
//
// It cross-compiles the manager for each platform exactly as `make build`
// does (CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X
// main.version=<version>" ./cmd, in the repository root) and puts each
// binary at /manager in an image built from scratch. The tarball is an
// oci-archive: `skopeo copy --all oci-archive:out/manager-image.tar
// docker://<ref>` or `crane push out/image <ref>` pushes it.
//
// Why scratch and not gcr.io/distroless/static:nonroot as the Dockerfile:
// no container registry is reachable from the machines that build it, so
// the base cannot be pulled. The image recreates what that base gives a
// static Go binary instead: /etc/passwd and /etc/group with root and
// nonroot (65532), the CA bundle, /tmp and /home/nonroot; it runs as
// 65532:65532. See package build.
//
// The image is deterministic: file mtimes and the configs' Created time
// are the Unix epoch, or SOURCE_DATE_EPOCH when set.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/hack/image/build"
)

const defaultRepository = "ghcr.io/ipam-bridge/cluster-api-ipam-provider-bridge"

func main() {
	root := flag.String("root", "../..", "root of the repository checkout (the main module)")
	version := flag.String("version", "dev", "manager version (main.version) and image version label")
	revision := flag.String("revision", "", "git commit for the revision label; `git rev-parse HEAD` of -root when empty, \"unknown\" outside a git checkout")
	ref := flag.String("ref", "", "image reference the release pushes; "+defaultRepository+":<version> when empty")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "comma-separated platforms")
	out := flag.String("out", "", "directory of the OCI image layout, replaced if there; <root>/out/image when empty")
	tarPath := flag.String("tar", "", "also write the layout as a tar (an oci-archive) here")
	caBundle := flag.String("ca-bundle", build.CABundlePath, "CA bundle to copy to "+build.CABundlePath)
	flag.Parse()

	if err := run(*root, *version, *revision, *ref, *platforms, *out, *tarPath, *caBundle); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(root, version, revision, ref, platformList, out, tarPath, caBundle string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(root, "cmd")); err != nil {
		return fmt.Errorf("-root %s: no cmd directory: %w", root, err)
	}
	if out == "" {
		out = filepath.Join(root, "out", "image")
	}
	if ref == "" {
		ref = defaultRepository + ":" + version
	}
	if _, err := build.TagOf(ref); err != nil {
		return fmt.Errorf("-ref: %w", err)
	}
	if revision == "" {
		revision = gitRevision(root)
	}
	ps, err := build.ParsePlatforms(platformList)
	if err != nil {
		return fmt.Errorf("-platforms: %w", err)
	}
	created, err := sourceDateEpoch()
	if err != nil {
		return err
	}

	start := time.Now()
	idx, err := build.Build(ctx, build.Options{
		Root:      root,
		Version:   version,
		Revision:  revision,
		Platforms: ps,
		CABundle:  caBundle,
		Created:   created,
		Log:       os.Stderr,
	})
	if err != nil {
		return err
	}
	if err := build.WriteLayout(out, idx, ref); err != nil {
		return fmt.Errorf("writing the layout: %w", err)
	}
	if err := summary(idx, ref, out); err != nil {
		return err
	}
	if tarPath != "" {
		if err := build.WriteTar(out, tarPath, created); err != nil {
			return fmt.Errorf("writing the tar: %w", err)
		}
		fi, err := os.Stat(tarPath)
		if err != nil {
			return err
		}
		fmt.Printf("wrote %s (%d bytes)\n", tarPath, fi.Size())
	}
	fmt.Fprintf(os.Stderr, "done in %s\n", time.Since(start).Round(time.Second))
	return nil
}

// summary prints the index digest and each platform's manifest and size.
func summary(idx v1.ImageIndex, ref, out string) error {
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: %s@%s\n", out, ref, d)
	for _, m := range im.Manifests {
		img, err := idx.Image(m.Digest)
		if err != nil {
			return err
		}
		mf, err := img.Manifest()
		if err != nil {
			return err
		}
		var compressed int64
		for _, l := range mf.Layers {
			compressed += l.Size
		}
		fmt.Printf("  %-16s %s  layers %d bytes compressed\n", m.Platform, m.Digest, compressed)
	}
	return nil
}

func gitRevision(root string) string {
	cmd := exec.Command("git", "rev-parse", "HEAD")
	cmd.Dir = root
	b, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err)
	}
	return time.Unix(n, 0).UTC(), nil
}
