package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The sigstore-conformance bundle-verify layout (see conformance/README.md): one directory per
// case holding bundle.sigstore.json and optionally artifact, identity, issuer, key.pub and
// trusted_root.json; a case whose name ends in _fail must be rejected.
const (
	defaultIdentity = "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main"
	defaultIssuer   = "https://token.actions.githubusercontent.com"
)

// ConformanceCase is a Case plus whether the suite expects it to verify.
type ConformanceCase struct {
	Case
	MustFail bool
}

// ConformanceCases reads the cases under dir (the folder holding bundle-verify/, or
// bundle-verify/ itself), sorted by name, with the suite's defaults filled in.
func ConformanceCases(dir string) ([]ConformanceCase, error) {
	casesDir := filepath.Join(dir, "bundle-verify")
	if !fileExists(casesDir) {
		casesDir, dir = dir, filepath.Dir(dir)
	}
	entries, err := os.ReadDir(casesDir)
	if err != nil {
		return nil, configf("conformance cases: %v", err)
	}
	defaultRoot := filepath.Join(dir, "production-trusted_root.json")
	defaultArtifact := filepath.Join(casesDir, "a.txt")
	if !fileExists(defaultArtifact) {
		defaultArtifact = filepath.Join(dir, "a.txt")
	}
	var cases []ConformanceCase
	for _, e := range entries {
		caseDir := filepath.Join(casesDir, e.Name())
		if !e.IsDir() || !fileExists(filepath.Join(caseDir, "bundle.sigstore.json")) {
			continue
		}
		c := ConformanceCase{MustFail: strings.HasSuffix(e.Name(), "_fail")}
		c.Name = e.Name()
		c.Bundle = filepath.Join(caseDir, "bundle.sigstore.json")
		c.Artifact = pathOr(filepath.Join(caseDir, "artifact"), defaultArtifact)
		c.TrustedRoot = pathOr(filepath.Join(caseDir, "trusted_root.json"), defaultRoot)
		if key := filepath.Join(caseDir, "key.pub"); fileExists(key) {
			c.Key = key
		} else {
			c.Identity = textOr(filepath.Join(caseDir, "identity"), defaultIdentity)
			c.Issuer = textOr(filepath.Join(caseDir, "issuer"), defaultIssuer)
		}
		cases = append(cases, c)
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].Name < cases[j].Name })
	if len(cases) == 0 {
		return nil, configf("no conformance cases under %s", casesDir)
	}
	return cases, nil
}

func pathOr(path, fallback string) string {
	if fileExists(path) {
		return path
	}
	return fallback
}

func textOr(path, fallback string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fallback
	}
	return strings.TrimSpace(string(data))
}

type conformanceResult struct {
	Case     string `json:"case"`
	Expected string `json:"expected"` // pass or fail
	Got      string `json:"got"`
	Agrees   bool   `json:"agrees"`
	Exit     int    `json:"exit"` // what `sgverify verify` exits with: 2 when the trust or key cannot be loaded
	Error    string `json:"error,omitempty"`
}

type conformanceReport struct {
	Client   string              `json:"client"`
	Total    int                 `json:"total"`
	Agree    int                 `json:"agree"`
	Disagree []string            `json:"disagree"`
	Results  []conformanceResult `json:"results"`
}

// cmdConformance verifies every case and reports where sigstore-go agrees with the suite.
// Exit 0 when it agrees on every case, 1 otherwise.
func cmdConformance(args []string, stdout io.Writer) error {
	fs := newFlagSet("conformance")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("conformance takes one DIR")
	}
	cases, err := ConformanceCases(pos[0])
	if err != nil {
		return err
	}
	vs := NewVerifiers()
	report := conformanceReport{Client: "sigstore-go " + sigstoreGoVersion(), Total: len(cases), Disagree: []string{}}
	for i := range cases {
		c := &cases[i]
		r := conformanceResult{Case: c.Name, Expected: "pass", Got: "pass"}
		if c.MustFail {
			r.Expected = "fail"
		}
		if _, err := VerifyCase(vs, &c.Case); err != nil {
			r.Got, r.Error, r.Exit = "fail", oneLine(err), 1
			var u usageError
			if errors.As(err, &u) {
				r.Exit = 2
			}
		}
		r.Agrees = r.Expected == r.Got
		if r.Agrees {
			report.Agree++
		} else {
			report.Disagree = append(report.Disagree, c.Name)
		}
		report.Results = append(report.Results, r)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(report); err != nil {
		return err
	}
	if len(report.Disagree) > 0 {
		return fmt.Errorf("sigstore-go disagrees with the suite on %d of %d cases: %s",
			len(report.Disagree), report.Total, strings.Join(report.Disagree, ", "))
	}
	return nil
}

// cmdManifest prints a bench manifest (a JSON list of cases) for the conformance cases.
func cmdManifest(args []string, stdout io.Writer) error {
	fs := newFlagSet("manifest")
	all := fs.Bool("all", false, "include the _fail cases")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("manifest takes one DIR")
	}
	cases, err := ConformanceCases(pos[0])
	if err != nil {
		return err
	}
	out := []Case{}
	for _, c := range cases {
		if *all || !c.MustFail {
			abs := c.Case
			for _, p := range []*string{&abs.Bundle, &abs.Artifact, &abs.TrustedRoot, &abs.Key} {
				if *p != "" {
					*p, _ = filepath.Abs(*p)
				}
			}
			out = append(out, abs)
		}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
