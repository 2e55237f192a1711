// kubecheck checks a Helm chart the way helm and the API server would, without helm's CLI
// (whose build is most of what CI spent on tools): helm's own chart loader, template engine
// and linter are linked here, so the Kubernetes packages compile once.
//
//	kubecheck lint CHART                                  # helm lint --strict CHART
//	kubecheck render CHART [--namespace NS] [--set K=V]...  # helm template, then the check below
//	kubecheck < manifests.yaml                            # the check alone
//
// The check decodes each document of a multi-document YAML stream strictly into its
// Kubernetes API type (an unknown or duplicated field is an error, as the API server's strict
// field validation makes it), and prints them all as one JSON array for the test to inspect.
// A kind it does not know is an error too: the chart must not grow a resource that nothing
// checks.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/strvals"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The types a chart may render, by apiVersion and kind.
func object(apiVersion, kind string) (any, bool) {
	switch apiVersion + " " + kind {
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, true
	case "v1 Secret":
		return &corev1.Secret{}, true
	case "v1 Service":
		return &corev1.Service{}, true
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}, true
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, true
	case "batch/v1 Job":
		return &batchv1.Job{}, true
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, true
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}, true
	case "rbac.authorization.k8s.io/v1 Role":
		return &rbacv1.Role{}, true
	case "rbac.authorization.k8s.io/v1 RoleBinding":
		return &rbacv1.RoleBinding{}, true
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}, true
	case "monitoring.coreos.com/v1 PrometheusRule":
		return &monitoringv1.PrometheusRule{}, true
	}
	return nil, false
}

func main() {
	args := os.Args[1:]
	if len(args) == 0 {
		input, err := io.ReadAll(os.Stdin)
		if err != nil {
			fail("reading stdin: %v", err)
		}
		check(input)
		return
	}
	switch args[0] {
	case "lint":
		if len(args) != 2 {
			fail("usage: kubecheck lint CHART")
		}
		lintStrict(args[1])
	case "render":
		if len(args) < 2 {
			fail("usage: kubecheck render CHART [--namespace NS] [--set K=V]...")
		}
		chart, namespace, sets := args[1], "default", []string{}
		for rest := args[2:]; len(rest) > 0; rest = rest[2:] {
			if len(rest) < 2 {
				fail("%s needs a value", rest[0])
			}
			switch rest[0] {
			case "--namespace":
				namespace = rest[1]
			case "--set":
				sets = append(sets, rest[1])
			default:
				fail("unknown option %s (expected --namespace or --set)", rest[0])
			}
		}
		check(render(chart, namespace, sets))
	default:
		fail("unknown command %q (expected lint, render, or manifests on stdin)", args[0])
	}
}

// lintStrict is `helm lint --strict`: a warning fails as an error does.
func lintStrict(chart string) {
	linter := lint.AllWithKubeVersion(chart, map[string]interface{}{}, "default", nil)
	failed := false
	for _, m := range linter.Messages {
		fmt.Fprintln(os.Stderr, m.Error())
		failed = failed || m.Severity >= support.WarningSev
	}
	if failed {
		fail("%s: the chart has warnings or errors", chart)
	}
	fmt.Printf("%s: linted, no warnings\n", chart)
}

// render is `helm template signet CHART`: the manifests and hooks, as one YAML stream.
func render(path, namespace string, sets []string) []byte {
	chart, err := loader.Load(path)
	if err != nil {
		fail("loading %s: %v", path, err)
	}
	values := map[string]interface{}{}
	for _, s := range sets {
		if err := strvals.ParseInto(s, values); err != nil {
			fail("--set %s: %v", s, err)
		}
	}
	if err := chartutil.ProcessDependenciesWithMerge(chart, values); err != nil {
		fail("dependencies: %v", err)
	}
	caps := chartutil.DefaultCapabilities
	if v := chart.Metadata.KubeVersion; v != "" && !chartutil.IsCompatibleRange(v, caps.KubeVersion.String()) {
		fail("the chart requires kubeVersion %s, not %s", v, caps.KubeVersion.String())
	}
	release := chartutil.ReleaseOptions{Name: "signet", Namespace: namespace, Revision: 1, IsInstall: true}
	top, err := chartutil.ToRenderValues(chart, values, release, caps)
	if err != nil {
		fail("values: %v", err)
	}
	files, err := engine.Engine{}.Render(chart, top)
	if err != nil {
		fail("rendering: %v", err)
	}
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		fail("sorting the manifests: %v", err)
	}
	var out bytes.Buffer
	for _, m := range manifests {
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	for _, h := range hooks {
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
	return out.Bytes()
}

func check(input []byte) {
	var out []json.RawMessage
	for i, doc := range documents(input) {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			fail("document %d: %v", i, err)
		}
		obj, ok := object(head.APIVersion, head.Kind)
		if !ok {
			fail("document %d: %s %s is not a kind this check knows", i, head.APIVersion, head.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			fail("document %d (%s): %v\n%s", i, head.Kind, err, doc)
		}
		encoded, err := json.Marshal(obj)
		if err != nil {
			fail("document %d: %v", i, err)
		}
		out = append(out, encoded)
	}
	if len(out) == 0 {
		fail("no manifests")
	}
	encoded, _ := json.Marshal(out)
	os.Stdout.Write(append(encoded, '\n'))
}

// documents splits a YAML stream at its `---` lines, leaving out documents that hold only
// comments (helm writes a `# Source:` line before each).
func documents(input []byte) [][]byte {
	var docs [][]byte
	for _, part := range strings.Split("\n"+string(input), "\n---") {
		meaningful := false
		for _, line := range strings.Split(part, "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				meaningful = true
				break
			}
		}
		if meaningful {
			docs = append(docs, bytes.TrimSpace([]byte(part)))
		}
	}
	return docs
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kubecheck: "+format+"\n", args...)
	os.Exit(1)
}
