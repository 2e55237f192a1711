package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/sigstore/sigstore-go/pkg/verify"
)

// verifyOutput is what `sgverify verify` prints on success: enough for a test to see which
// observer timestamps sigstore-go accepted (Tlog for a Rekor v1 SET's integrated time,
// TimestampAuthority for an RFC 3161 timestamp) and which identity it matched.
type verifyOutput struct {
	Verified   bool                                 `json:"verified"`
	Timestamps []verify.TimestampVerificationResult `json:"timestamps"`
	SAN        string                               `json:"certificate_san,omitempty"`
	Issuer     string                               `json:"certificate_issuer,omitempty"`
}

func cmdVerify(args []string, stdout io.Writer) error {
	fs := newFlagSet("verify")
	var c Case
	fs.StringVar(&c.TrustedRoot, "trusted-root", "", "trusted_root.json")
	fs.StringVar(&c.Bundle, "bundle", "", "Sigstore bundle (JSON)")
	fs.StringVar(&c.Identity, "identity", "", "expected certificate SAN")
	fs.StringVar(&c.Identity, "certificate-identity", "", "alias of --identity")
	fs.StringVar(&c.Issuer, "issuer", "", "expected OIDC issuer")
	fs.StringVar(&c.Issuer, "certificate-oidc-issuer", "", "alias of --issuer")
	fs.StringVar(&c.Key, "key", "", "PEM public key to verify with instead of an identity")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("verify takes exactly one ARTIFACT_OR_sha256:HEX, got %d", len(pos))
	}
	c.Artifact = pos[0]
	if c.TrustedRoot == "" || c.Bundle == "" {
		return usagef("--trusted-root and --bundle are required")
	}
	res, err := VerifyCase(NewVerifiers(), &c)
	if err != nil {
		return err
	}
	out := verifyOutput{Verified: true, Timestamps: res.VerifiedTimestamps}
	if res.Signature != nil && res.Signature.Certificate != nil {
		out.SAN = res.Signature.Certificate.SubjectAlternativeName
		out.Issuer = res.Signature.Certificate.Issuer
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("writing result: %w", err)
	}
	return nil
}
