// Command release writes the provider's clusterctl release assets:
//
//	go run ./hack/release -version v0.1.0 -out out
//
// writes out/ipam-components.yaml, out/metadata.yaml and
// out/monitoring.yaml. With -repository DIR it lays them out as a
// clusterctl local repository instead:
// DIR/ipam-bridge/<version>/{ipam-components.yaml,metadata.yaml,monitoring.yaml}. With
// -print-image it prints the manager image the components name, which
// `make release` builds under that reference.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/hack/release/components"
)

func main() {
	version := flag.String("version", "", "release version, for example v0.1.0")
	out := flag.String("out", "out", "directory to write the assets to")
	repository := flag.String("repository", "", "write a clusterctl local repository rooted here instead of -out")
	root := flag.String("root", ".", "root of the repository checkout")
	printImage := flag.Bool("print-image", false, "print the image reference the components name for -version, and write nothing")
	flag.Parse()
	if *version == "" {
		fmt.Fprintln(os.Stderr, "release: -version is required")
		os.Exit(2)
	}
	if *printImage {
		fmt.Println(components.Image(*version))
		return
	}
	dir := *out
	if *repository != "" {
		dir = filepath.Join(*repository, components.ProviderLabel, *version)
	}
	if err := components.Write(*root, *version, dir); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s, %s and %s\n", filepath.Join(dir, components.ComponentsFile), filepath.Join(dir, components.MetadataFile),
		filepath.Join(dir, components.MonitoringFile))
}
