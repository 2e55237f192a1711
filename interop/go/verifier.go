package main

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Case is one bundle to verify and the trust and policy to verify it with. It is also the
// element of a bench manifest; relative paths in a manifest are relative to the manifest.
type Case struct {
	Name        string `json:"name,omitempty"`
	Bundle      string `json:"bundle"`
	Artifact    string `json:"artifact"` // a file, or sha256:<64 hex> when that is not a file
	TrustedRoot string `json:"trusted_root"`
	Identity    string `json:"identity,omitempty"` // certificate SAN, matched exactly
	Issuer      string `json:"issuer,omitempty"`   // OIDC issuer, matched exactly
	Key         string `json:"key,omitempty"`      // PEM public key: verify with it instead of an identity
}

// Verifiers builds each sigstore-go verifier once per distinct (trusted root, key) pair and
// loads each trusted root once, so that repeated verifications measure verification only.
type Verifiers struct {
	roots     map[string]*root.TrustedRoot
	verifiers map[string]*verify.Verifier
}

func NewVerifiers() *Verifiers {
	return &Verifiers{roots: map[string]*root.TrustedRoot{}, verifiers: map[string]*verify.Verifier{}}
}

// For returns the verifier for a case. Every verifier requires a transparency log entry and
// an observer timestamp (an RFC 3161 timestamp, or a Rekor v1 SET's integrated time); a
// certificate-based verifier also requires an embedded SCT. Failing to load the trust
// material is a configuration error.
func (vs *Verifiers) For(c *Case) (*verify.Verifier, error) {
	cacheKey := c.TrustedRoot + "\x00" + c.Key
	if v, ok := vs.verifiers[cacheKey]; ok {
		return v, nil
	}
	tr, ok := vs.roots[c.TrustedRoot]
	if !ok {
		var err error
		tr, err = root.NewTrustedRootFromPath(c.TrustedRoot)
		if err != nil {
			return nil, configf("trusted root %s: %v", c.TrustedRoot, err)
		}
		vs.roots[c.TrustedRoot] = tr
	}
	var material root.TrustedMaterial = tr
	opts := []verify.VerifierOption{verify.WithTransparencyLog(1), verify.WithObserverTimestamps(1)}
	if c.Key != "" {
		keyMaterial, err := publicKeyMaterial(c.Key)
		if err != nil {
			return nil, configf("key %s: %v", c.Key, err)
		}
		material = root.TrustedMaterialCollection{keyMaterial, tr}
	} else {
		opts = append(opts, verify.WithSignedCertificateTimestamps(1))
	}
	v, err := verify.NewVerifier(material, opts...)
	if err != nil {
		return nil, configf("building verifier: %v", err)
	}
	vs.verifiers[cacheKey] = v
	return v, nil
}

// publicKeyMaterial trusts one PEM public key with no validity window; the signature
// algorithm follows from the key (LoadDefaultVerifier).
func publicKeyMaterial(path string) (root.TrustedMaterial, error) {
	pemBytes, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return nil, err
	}
	sv, err := signature.LoadDefaultVerifier(pub)
	if err != nil {
		return nil, err
	}
	key := root.NewExpiringKey(sv, time.Time{}, time.Time{})
	return root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
		return key, nil
	}), nil
}

// Policy is the per-case part of verification that does not change between iterations.
type Policy struct {
	identity []verify.PolicyOption
	digest   []byte // set when the artifact is given as sha256:<hex>
	artifact []byte // the artifact's bytes otherwise
}

var digestArg = regexp.MustCompile(`^sha256:([0-9a-fA-F]{64})$`)

// NewPolicy reads the artifact (or parses its digest) and builds the identity policy.
func NewPolicy(c *Case) (*Policy, error) {
	p := &Policy{}
	if c.Key != "" {
		p.identity = []verify.PolicyOption{verify.WithKey()}
	} else {
		if c.Identity == "" || c.Issuer == "" {
			return nil, usagef("--identity and --issuer are required without --key")
		}
		id, err := verify.NewShortCertificateIdentity(c.Issuer, "", c.Identity, "")
		if err != nil {
			return nil, configf("certificate identity: %v", err)
		}
		p.identity = []verify.PolicyOption{verify.WithCertificateIdentity(id)}
	}
	if c.Artifact == "" {
		return nil, usagef("an artifact (file or sha256:<hex>) is required")
	}
	if m := digestArg.FindStringSubmatch(c.Artifact); m != nil && !fileExists(c.Artifact) {
		p.digest, _ = hex.DecodeString(m[1])
		return p, nil
	}
	data, err := os.ReadFile(c.Artifact)
	if err != nil {
		return nil, configf("artifact: %v", err)
	}
	p.artifact = data
	return p, nil
}

func (p *Policy) build() verify.PolicyBuilder {
	var artifact verify.ArtifactPolicyOption
	if p.digest != nil {
		artifact = verify.WithArtifactDigest("sha256", p.digest)
	} else {
		artifact = verify.WithArtifact(bytes.NewReader(p.artifact))
	}
	return verify.NewPolicy(artifact, p.identity...)
}

// ParseBundle parses a bundle's JSON as sigstore-go does when loading it from a file. A
// bundle that does not parse or validate is rejected, not a usage error.
func ParseBundle(data []byte) (*bundle.Bundle, error) {
	var b bundle.Bundle
	if err := b.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	return &b, nil
}

// VerifyBundle verifies one parsed bundle with a verifier and policy built beforehand.
func VerifyBundle(v *verify.Verifier, b *bundle.Bundle, p *Policy) (*verify.VerificationResult, error) {
	return v.Verify(b, p.build())
}

// VerifyCase loads everything a case names and verifies it once.
func VerifyCase(vs *Verifiers, c *Case) (*verify.VerificationResult, error) {
	v, err := vs.For(c)
	if err != nil {
		return nil, err
	}
	p, err := NewPolicy(c)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(c.Bundle)
	if err != nil {
		return nil, configf("bundle: %v", err)
	}
	b, err := ParseBundle(data)
	if err != nil {
		return nil, err
	}
	return VerifyBundle(v, b, p)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// oneLine keeps an error on one line, as signet's CLI contract asks of error messages.
func oneLine(err error) string {
	if err == nil {
		return ""
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
