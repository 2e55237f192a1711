package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/verify"
)

// benchCase is a case prepared for timing: everything that a real verifier would load once
// (trusted root, verifier, policy, artifact, bundle bytes) is loaded before the clock runs.
type benchCase struct {
	Case
	verifier *verify.Verifier
	policy   *Policy
	raw      []byte
	parsed   *bundle.Bundle
	samples  []int64
}

type benchBundle struct {
	Name     string `json:"name"`
	Bundle   string `json:"bundle"`
	MedianNs int64  `json:"median_ns"`
	MinNs    int64  `json:"min_ns"`
	MaxNs    int64  `json:"max_ns"`
}

type benchReport struct {
	Client                 string        `json:"client"`
	GoVersion              string        `json:"go_version"`
	Measures               string        `json:"measures"`
	Iterations             int           `json:"iterations"`
	Bundles                []benchBundle `json:"bundles"`
	MedianNs               int64         `json:"median_ns"`                  // over every sample of every bundle
	MedianOfBundleMedianNs int64         `json:"median_of_bundle_median_ns"` // each bundle weighs the same
}

func cmdBench(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench")
	var single Case
	fs.StringVar(&single.TrustedRoot, "trusted-root", "", "trusted_root.json for the BUNDLE arguments")
	fs.StringVar(&single.Identity, "identity", "", "expected certificate SAN for the BUNDLE arguments")
	fs.StringVar(&single.Issuer, "issuer", "", "expected OIDC issuer for the BUNDLE arguments")
	fs.StringVar(&single.Key, "key", "", "PEM public key for the BUNDLE arguments")
	fs.StringVar(&single.Artifact, "artifact", "", "artifact (or sha256:<hex>) for the BUNDLE arguments")
	manifest := fs.String("manifest", "", "JSON list of {bundle, artifact, trusted_root, identity, issuer, key}")
	conformance := fs.String("conformance", "", "sigstore-conformance assets folder: bench its passing bundle-verify cases")
	iterations := fs.Int("iterations", 100, "verifications per bundle")
	excludeParse := fs.Bool("exclude-parse", false, "parse each bundle once, outside the timed region")
	bundles, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if *iterations < 1 {
		return usagef("--iterations must be at least 1")
	}

	var cases []Case
	sources := 0
	if *manifest != "" {
		sources++
		if cases, err = loadManifest(*manifest); err != nil {
			return err
		}
	}
	if *conformance != "" {
		sources++
		all, err := ConformanceCases(*conformance)
		if err != nil {
			return err
		}
		for _, c := range all {
			if !c.MustFail {
				cases = append(cases, c.Case)
			}
		}
	}
	if len(bundles) > 0 {
		sources++
		if single.TrustedRoot == "" {
			return usagef("--trusted-root is required with BUNDLE arguments")
		}
		for _, b := range bundles {
			c := single
			c.Bundle, c.Name = b, b
			cases = append(cases, c)
		}
	}
	if sources != 1 {
		return usagef("give exactly one of --conformance DIR, --manifest FILE or BUNDLE arguments")
	}
	if len(cases) == 0 {
		return usagef("nothing to bench")
	}

	prepared, err := prepare(cases, *excludeParse)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "sgverify: %d bundles verified once; timing %d iterations each\n", len(prepared), *iterations)
	measure(prepared, *iterations, *excludeParse)

	report := summarize(prepared, *iterations, *excludeParse)
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(report)
}

// prepare loads every case and verifies it once, untimed: a bundle that does not verify has
// no verification time to report, so it is an error naming the bundle.
func prepare(cases []Case, parseOnce bool) ([]*benchCase, error) {
	vs := NewVerifiers()
	var out []*benchCase
	for _, c := range cases {
		bc := &benchCase{Case: c}
		if bc.Name == "" {
			bc.Name = c.Bundle
		}
		var err error
		if bc.verifier, err = vs.For(&bc.Case); err != nil {
			return nil, fmt.Errorf("%s: %w", bc.Name, err)
		}
		if bc.policy, err = NewPolicy(&bc.Case); err != nil {
			return nil, fmt.Errorf("%s: %w", bc.Name, err)
		}
		if bc.raw, err = os.ReadFile(c.Bundle); err != nil {
			return nil, configf("%s: %v", bc.Name, err)
		}
		b, err := ParseBundle(bc.raw)
		if err == nil {
			_, err = VerifyBundle(bc.verifier, b, bc.policy)
		}
		if err != nil {
			return nil, fmt.Errorf("%s does not verify, so it cannot be timed: %s", bc.Name, oneLine(err))
		}
		if parseOnce {
			bc.parsed = b
		}
		out = append(out, bc)
	}
	return out, nil
}

// measure runs the iterations round-robin over the bundles, so that noise from a shared
// machine spreads over all bundles instead of landing on whichever ran at a bad moment.
func measure(cases []*benchCase, iterations int, parseOnce bool) {
	runtime.GC()
	for i := 0; i < iterations; i++ {
		for _, bc := range cases {
			start := time.Now()
			b := bc.parsed
			var err error
			if !parseOnce {
				b, err = ParseBundle(bc.raw)
			}
			if err == nil {
				_, err = VerifyBundle(bc.verifier, b, bc.policy)
			}
			elapsed := time.Since(start)
			if err != nil {
				// It verified during prepare; sigstore-go is deterministic for a fixed input.
				panic(fmt.Sprintf("%s stopped verifying: %v", bc.Name, err))
			}
			bc.samples = append(bc.samples, elapsed.Nanoseconds())
		}
	}
}

func summarize(cases []*benchCase, iterations int, parseOnce bool) benchReport {
	r := benchReport{
		Client:     "sigstore-go " + sigstoreGoVersion(),
		GoVersion:  runtime.Version(),
		Measures:   "bundle JSON parse + verify, per verification (trusted root and verifier built once)",
		Iterations: iterations,
	}
	if parseOnce {
		r.Measures = "verify of a parsed bundle, per verification (trusted root, verifier and bundle loaded once)"
	}
	var all, medians []int64
	for _, bc := range cases {
		s := slices.Clone(bc.samples)
		slices.Sort(s)
		med := median(s)
		r.Bundles = append(r.Bundles, benchBundle{Name: bc.Name, Bundle: bc.Bundle, MedianNs: med, MinNs: s[0], MaxNs: s[len(s)-1]})
		all = append(all, s...)
		medians = append(medians, med)
	}
	slices.Sort(all)
	slices.Sort(medians)
	r.MedianNs = median(all)
	r.MedianOfBundleMedianNs = median(medians)
	return r
}

// median of sorted samples; the mean of the two middle ones for an even count.
func median(sorted []int64) int64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// loadManifest reads a JSON list of cases; relative paths are relative to the manifest.
func loadManifest(path string) ([]Case, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, configf("manifest: %v", err)
	}
	var cases []Case
	if err := json.Unmarshal(data, &cases); err != nil {
		return nil, configf("manifest %s: %v", path, err)
	}
	base := filepath.Dir(path)
	for i := range cases {
		c := &cases[i]
		if c.Bundle == "" || c.TrustedRoot == "" || c.Artifact == "" {
			return nil, configf("manifest %s: entry %d needs bundle, artifact and trusted_root", path, i)
		}
		if c.Name == "" {
			c.Name = c.Bundle
		}
		for _, p := range []*string{&c.Bundle, &c.TrustedRoot, &c.Key} {
			if *p != "" && !filepath.IsAbs(*p) {
				*p = filepath.Join(base, *p)
			}
		}
		if !filepath.IsAbs(c.Artifact) && (digestArg.FindStringSubmatch(c.Artifact) == nil || fileExists(filepath.Join(base, c.Artifact))) {
			c.Artifact = filepath.Join(base, c.Artifact)
		}
	}
	return cases, nil
}

// sigstoreGoVersion reports the sigstore-go module version linked into this binary.
func sigstoreGoVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/sigstore/sigstore-go" {
				return dep.Version
			}
		}
	}
	return "(unknown)"
}
