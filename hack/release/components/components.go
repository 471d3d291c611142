// Package components builds the provider's clusterctl release assets: the
// components YAML (config/default rendered with kustomize) and the metadata
// YAML. `make release` (hack/release) and test/release use the same code.
package components

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
)

const (
	// ComponentsFile and MetadataFile are the names of the release assets
	// clusterctl reads; MonitoringFile is the optional monitoring.
	ComponentsFile = "ipam-components.yaml"
	MetadataFile   = "metadata.yaml"
	MonitoringFile = "monitoring.yaml"

	// NamespaceVariable and PrometheusReleaseVariable are the clusterctl
	// variables of MonitoringFile: the provider's namespace, and the Helm
	// release of the kube-prometheus-stack that should select it.
	NamespaceVariable         = "${IPAM_BRIDGE_NAMESPACE:=" + TargetNamespace + "}"
	PrometheusReleaseVariable = "${IPAM_BRIDGE_PROMETHEUS_RELEASE:=kube-prometheus-stack}"
	// prometheusReleaseLabel is the label kube-prometheus-stack selects
	// ServiceMonitors and PrometheusRules by.
	prometheusReleaseLabel = "release"

	// ProviderName is the provider's name in clusterctl.yaml, so that
	// `clusterctl init --ipam bridge` installs it; clusterctl labels its
	// objects cluster.x-k8s.io/provider=ipam-bridge.
	ProviderName = "bridge"
	// ProviderLabel is clusterctl's label for the provider ("ipam-" + name),
	// also the directory of a local clusterctl repository.
	ProviderLabel = "ipam-" + ProviderName
	// TargetNamespace is where the components install by default.
	TargetNamespace = "capi-ipam-bridge-system"

	// ImageRepository is the manager's image without tag. The components
	// name it literally, not through a variable: clusterctl applies its
	// image overrides (the `images:` of clusterctl.yaml) even when it does
	// not substitute variables (`generate provider --describe`, `--raw`),
	// and refuses an image reference that is a ${VAR}.
	ImageRepository = "ghcr.io/ipam-bridge/cluster-api-ipam-provider-bridge"
	// devImage is the image config/manager names; a release replaces its
	// tag with the release version.
	devImage = ImageRepository + ":dev"
)

// Kustomize renders a kustomization directory, as `kustomize build` would.
func Kustomize(dir string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resources, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return resources.AsYaml()
}

// Components renders config/default for releaseVersion: the manager's image
// defaults to ImageRepository:releaseVersion.
func Components(repoRoot, releaseVersion string) ([]byte, error) {
	if _, err := parseVersion(releaseVersion); err != nil {
		return nil, err
	}
	out, err := Kustomize(filepath.Join(repoRoot, "config", "default"))
	if err != nil {
		return nil, err
	}
	if n := bytes.Count(out, []byte(devImage)); n != 1 {
		return nil, fmt.Errorf("the components name the image %s %d times, want once (see config/manager/manager.yaml)", devImage, n)
	}
	return bytes.Replace(out, []byte(devImage), []byte(Image(releaseVersion)), 1), nil
}

// Image is the manager image a release of releaseVersion pushes, and its
// components name.
func Image(releaseVersion string) string {
	return ImageRepository + ":" + releaseVersion
}

// Metadata reads metadata.yaml from repoRoot and checks that it has a release
// series for releaseVersion, as clusterctl will.
func Metadata(repoRoot, releaseVersion string) ([]byte, *clusterctlv1.Metadata, error) {
	v, err := parseVersion(releaseVersion)
	if err != nil {
		return nil, nil, err
	}
	raw, err := os.ReadFile(filepath.Join(repoRoot, MetadataFile))
	if err != nil {
		return nil, nil, err
	}
	md := &clusterctlv1.Metadata{}
	if err := yaml.UnmarshalStrict(raw, md); err != nil {
		return nil, nil, fmt.Errorf("parsing %s: %w", MetadataFile, err)
	}
	if md.APIVersion != clusterctlv1.GroupVersion.String() || md.Kind != "Metadata" {
		return nil, nil, fmt.Errorf("%s: want apiVersion %s and kind Metadata, got %s %s", MetadataFile, clusterctlv1.GroupVersion, md.APIVersion, md.Kind)
	}
	if md.GetReleaseSeriesForVersion(v) == nil {
		return nil, nil, fmt.Errorf("%s has no release series for %d.%d (version %s): add one", MetadataFile, v.Major(), v.Minor(), releaseVersion)
	}
	return raw, md, nil
}

// Write writes the components, metadata and monitoring YAML for
// releaseVersion into dir.
func Write(repoRoot, releaseVersion, dir string) error {
	comps, err := Components(repoRoot, releaseVersion)
	if err != nil {
		return err
	}
	monitoring, err := Monitoring(repoRoot)
	if err != nil {
		return err
	}
	md, _, err := Metadata(repoRoot, releaseVersion)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ComponentsFile), comps, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, MonitoringFile), monitoring, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, MetadataFile), md, 0o644)
}

func parseVersion(v string) (*version.Version, error) {
	if !strings.HasPrefix(v, "v") {
		return nil, fmt.Errorf("release version %q must start with v, for example v0.1.0", v)
	}
	parsed, err := version.ParseSemantic(v)
	if err != nil {
		return nil, fmt.Errorf("release version %q: %w", v, err)
	}
	return parsed, nil
}

// Monitoring renders config/prometheus as the release asset MonitoringFile:
// the namespace and the label by which a kube-prometheus-stack Prometheus
// selects the ServiceMonitor and PrometheusRule become clusterctl
// variables, so that `clusterctl generate yaml --from monitoring.yaml`
// writes them for wherever the provider was installed
// (`clusterctl init --target-namespace`) and whichever Prometheus runs.
func Monitoring(repoRoot string) ([]byte, error) {
	raw, err := Kustomize(filepath.Join(repoRoot, "config", "prometheus"))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("config/prometheus: %w", err)
		}
		meta, _ := obj["metadata"].(map[string]any)
		if meta == nil {
			return nil, fmt.Errorf("config/prometheus: an object without metadata")
		}
		if ns, ok := meta["namespace"]; ok {
			if ns != TargetNamespace {
				return nil, fmt.Errorf("config/prometheus: %s %s is in namespace %v, want %s", obj["kind"], meta["name"], ns, TargetNamespace)
			}
			meta["namespace"] = NamespaceVariable
		}
		if subjects, ok := obj["subjects"].([]any); ok {
			for _, s := range subjects {
				if s, ok := s.(map[string]any); ok && s["namespace"] == TargetNamespace {
					s["namespace"] = NamespaceVariable
				}
			}
		}
		if labels, ok := meta["labels"].(map[string]any); ok {
			if _, ok := labels[prometheusReleaseLabel]; ok {
				labels[prometheusReleaseLabel] = PrometheusReleaseVariable
			}
		}
		rendered, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		if bytes.Contains(bytes.ReplaceAll(rendered, []byte(NamespaceVariable), nil), []byte(TargetNamespace)) {
			return nil, fmt.Errorf("config/prometheus: %s %s names the namespace %s where the release cannot rewrite it", obj["kind"], meta["name"], TargetNamespace)
		}
		if out.Len() > 0 {
			out.WriteString("---\n")
		}
		out.Write(rendered)
	}
	return out.Bytes(), nil
}
