// kubecheck reads the manifests `helm template` renders (multi-document YAML, on stdin),
// decodes each document strictly into its Kubernetes API type (an unknown or duplicated field
// is an error, as the API server's strict field validation makes it), and prints them all as
// one JSON array for the test to inspect. A kind it does not know is an error too: the chart
// must not grow a resource that nothing checks.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

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
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail("reading stdin: %v", err)
	}
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
		fail("no manifests on stdin")
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
