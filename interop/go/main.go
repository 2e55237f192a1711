// sgverify: sigstore-go v1.3.0 as a third independent client of signet (beside cosign and
// sigstore-python). It verifies Sigstore bundles offline against a trusted_root.json and, in
// bench mode, times verification in-process so signet's own verifier has a peer to compare with.
//
//	sgverify verify --trusted-root F --bundle B (--identity SAN --issuer URL | --key PEM) ARTIFACT_OR_sha256:HEX
//	sgverify bench  (--conformance DIR | --manifest M.json | --trusted-root F ... BUNDLE...) [--iterations N]
//	sgverify conformance DIR
//	sgverify manifest [--all] DIR
//	sgverify version
//
// Exit codes: 0 verified (or ok), 1 verification failed, 2 usage or configuration error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
)

const usageText = `usage:
  sgverify verify --trusted-root F --bundle B (--identity SAN --issuer URL | --key PEM) ARTIFACT_OR_sha256:HEX
      verify one bundle; exit 0 verified, 1 rejected (the reason on stderr), 2 usage
  sgverify bench [--iterations N] [--exclude-parse] --conformance DIR
  sgverify bench [--iterations N] [--exclude-parse] --manifest M.json
  sgverify bench [--iterations N] [--exclude-parse] --trusted-root F (--identity SAN --issuer URL | --key PEM) --artifact A BUNDLE...
      verify each bundle N times in-process and print timings as JSON on stdout
  sgverify conformance DIR
      run every sigstore-conformance bundle-verify case under DIR and score the results
  sgverify manifest [--all] DIR
      print a bench manifest for the passing conformance cases under DIR (--all: every case)
  sgverify tuf --url URL --root root.json --cache DIR --out DIR TARGET...
      fetch TARGETs through sigstore-go's TUF client, from root.json, into DIR
  sgverify note-keygen NAME
  sgverify witness-drive --skey SKEY --witness URL --witness-key PEM --witness-name NAME [--sizes 5,17,300]
  sgverify cosig-verify --note FILE --log-vkey VKEY --witness-ssh-key FILE --witness-name NAME
      witnessing, checked with golang.org/x/mod's note and tlog and filippo.io/torchwood
      (see witness_cmd.go)
  sgverify version
`

// usageError marks errors that are the caller's (exit 2) rather than a rejected bundle: a bad
// command line (hint: point at the usage) or trust, key or input files that cannot be loaded.
type usageError struct {
	err  error
	hint bool
}

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// usagef reports a bad command line.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...), true}
}

// configf reports an input that cannot be loaded (missing file, unusable trusted root or key).
func configf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...), false}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return 2
	}
	var err error
	switch args[0] {
	case "verify":
		err = cmdVerify(args[1:], stdout)
	case "bench":
		err = cmdBench(args[1:], stdout, stderr)
	case "conformance":
		err = cmdConformance(args[1:], stdout)
	case "manifest":
		err = cmdManifest(args[1:], stdout)
	case "tuf":
		err = cmdTUF(args[1:], stdout)
	case "note-keygen":
		err = cmdNoteKeygen(args[1:], stdout)
	case "witness-drive":
		err = cmdWitnessDrive(args[1:], stdout)
	case "cosig-verify":
		err = cmdCosigVerify(args[1:], stdout)
	case "version":
		fmt.Fprintf(stdout, "sgverify: sigstore-go %s, %s\n", sigstoreGoVersion(), runtime.Version())
		return 0
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usageText)
		return 0
	default:
		err = usagef("unknown command %q", args[0])
	}
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usageText)
		return 0
	}
	var u usageError
	if errors.As(err, &u) {
		if u.hint {
			fmt.Fprintf(stderr, "sgverify: %v (sgverify help shows the usage)\n", err)
		} else {
			fmt.Fprintf(stderr, "sgverify: %v\n", err)
		}
		return 2
	}
	fmt.Fprintf(stderr, "sgverify: %v\n", err)
	return 1
}

// parseInterleaved parses flags that may appear before, between or after positional
// arguments (the conformance protocol puts the artifact last, cosign-style callers put it
// anywhere). It returns the positional arguments in order.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err, true}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}
