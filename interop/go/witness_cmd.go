package main

// Witnessing, checked by independent code: golang.org/x/mod's sumdb/note and tlog (the Go
// checksum database's signed notes and Merkle trees) and filippo.io/torchwood (the library
// litewitness is built on, with its cosignature/v1 signer and verifier).
//
//	sgverify note-keygen NAME
//	    print a new Ed25519 note signer key and its verifier key (two lines)
//	sgverify witness-drive --skey SKEY --witness URL --witness-key PEM --witness-name NAME --sizes 5,17,300
//	    act as a C2SP log: grow a tlog tree, submit each size to the witness with a consistency
//	    proof, and verify each cosignature with torchwood's verifier of the witness's key;
//	    then check that a stale old size gets 409 with the size held. Prints a JSON summary.
//	sgverify cosig-verify --note FILE --log-vkey VKEY --witness-ssh-key FILE --witness-name NAME
//	    verify a checkpoint's log signature (x/mod note) and a witness's cosignature on it
//	    (torchwood), the witness's key read from an OpenSSH private key file (litewitness's)

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"filippo.io/torchwood"
	"golang.org/x/crypto/ssh"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

func cmdNoteKeygen(args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return usagef("note-keygen takes one NAME")
	}
	skey, vkey, err := note.GenerateKey(rand.Reader, args[0])
	if err != nil {
		return configf("note-keygen: %v", err)
	}
	fmt.Fprintf(stdout, "%s\n%s\n", skey, vkey)
	return nil
}

// cosignatureVerifier is torchwood's verifier of a witness key, from the private key.
func cosignatureVerifier(name string, key crypto.Signer) (note.Verifier, error) {
	signer, err := torchwood.NewCosignatureSigner(name, key)
	if err != nil {
		return nil, err
	}
	return signer.Verifier(), nil
}

func readPKCS8Ed25519(path string) (ed25519.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an Ed25519 key", path)
	}
	return ek, nil
}

// memTree is a tlog tree of stored hashes.
type memTree struct{ hashes []tlog.Hash }

func (m *memTree) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(m.hashes)) {
			return nil, fmt.Errorf("hash %d not stored", x)
		}
		out[i] = m.hashes[x]
	}
	return out, nil
}

func (m *memTree) grow(n int64) error {
	for cur := treeSize(m); cur < n; cur++ {
		added, err := tlog.StoredHashes(cur, []byte(fmt.Sprintf("entry %d", cur)), m)
		if err != nil {
			return err
		}
		m.hashes = append(m.hashes, added...)
	}
	return nil
}

// treeSize counts the leaves of the stored hashes: the size whose storage length matches.
func treeSize(m *memTree) int64 {
	var n int64
	for tlog.StoredHashCount(n) < int64(len(m.hashes)) {
		n++
	}
	return n
}

type driveResult struct {
	// The witness's vkey as torchwood writes it, to compare with the witness's own.
	WitnessVkey string  `json:"witness_vkey"`
	Cosigned    []int64 `json:"cosigned"`
	Stale409    string  `json:"stale_409_body"`
	Fork409     string  `json:"fork_409_body"`
}

func cmdWitnessDrive(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("witness-drive", flag.ContinueOnError)
	skey := fs.String("skey", "", "the log's note signer key (note-keygen)")
	witness := fs.String("witness", "", "the witness's submission prefix")
	wkeyPath := fs.String("witness-key", "", "the witness's PKCS#8 Ed25519 key (to build torchwood's verifier)")
	wname := fs.String("witness-name", "", "the witness's name")
	sizes := fs.String("sizes", "5,17,300", "the sizes to submit, increasing")
	if err := fs.Parse(args); err != nil {
		return usagef("%v", err)
	}
	signer, err := note.NewSigner(*skey)
	if err != nil {
		return configf("--skey: %v", err)
	}
	logVerifier, err := torchwood.NewVerifierFromSigner(*skey)
	if err != nil {
		return configf("--skey: %v", err)
	}
	wkey, err := readPKCS8Ed25519(*wkeyPath)
	if err != nil {
		return configf("--witness-key: %v", err)
	}
	wverifier, err := cosignatureVerifier(*wname, wkey)
	if err != nil {
		return configf("witness verifier: %v", err)
	}
	verifiers := note.VerifierList(logVerifier, wverifier)

	tree := &memTree{}
	var old int64
	var result driveResult
	if v, ok := wverifier.(*torchwood.CosignatureVerifier); ok {
		result.WitnessVkey = v.String()
	}
	checkpoint := func(n int64) (string, tlog.Hash, error) {
		h, err := tlog.TreeHash(n, tree)
		if err != nil {
			return "", h, err
		}
		text := torchwood.Checkpoint{Origin: signer.Name(), Tree: tlog.Tree{N: n, Hash: h}}.String()
		signed, err := note.Sign(&note.Note{Text: text}, signer)
		return string(signed), h, err
	}
	post := func(body string) (int, string, string, error) {
		resp, err := http.Post(strings.TrimRight(*witness, "/")+"/add-checkpoint", "text/plain", strings.NewReader(body))
		if err != nil {
			return 0, "", "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b), err
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= old {
			return usagef("--sizes must be increasing integers")
		}
		if err := tree.grow(n); err != nil {
			return err
		}
		signed, _, err := checkpoint(n)
		if err != nil {
			return err
		}
		var proof tlog.TreeProof
		if old > 0 {
			if proof, err = tlog.ProveTree(n, old, tree); err != nil {
				return err
			}
		}
		var body bytes.Buffer
		fmt.Fprintf(&body, "old %d\n", old)
		for _, p := range proof {
			fmt.Fprintf(&body, "%s\n", base64.StdEncoding.EncodeToString(p[:]))
		}
		body.WriteString("\n" + signed)
		status, _, answer, err := post(body.String())
		if err != nil {
			return err
		}
		if status != 200 {
			return fmt.Errorf("size %d: witness answered %d: %s", n, status, answer)
		}
		// The witness's lines, added to the note, must carry its cosignature, by torchwood.
		opened, err := note.Open([]byte(signed+answer), verifiers)
		if err != nil {
			return fmt.Errorf("size %d: the cosigned note does not open: %v", n, err)
		}
		found := false
		for _, sig := range opened.Sigs {
			if sig.Name == wverifier.Name() && sig.Hash == wverifier.KeyHash() {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("size %d: no cosignature by %s verifies in %q", n, wverifier.Name(), answer)
		}
		result.Cosigned = append(result.Cosigned, n)
		old = n
	}
	// A stale old size: 409, the size held, text/x.tlog.size.
	signed, _, err := checkpoint(old)
	if err != nil {
		return err
	}
	status, ctype, answer, err := post("old 1\n\n" + signed)
	if err != nil {
		return err
	}
	if status != 409 || ctype != "text/x.tlog.size" {
		return fmt.Errorf("stale old size: got %d %q %q, want 409 text/x.tlog.size", status, ctype, answer)
	}
	result.Stale409 = answer
	// Another root at the size held: 409, never a cosignature.
	other, err := note.Sign(&note.Note{Text: torchwood.Checkpoint{Origin: signer.Name(), Tree: tlog.Tree{N: old, Hash: tlog.Hash{1}}}.String()}, signer)
	if err != nil {
		return err
	}
	status, _, answer, err = post(fmt.Sprintf("old %d\n\n%s", old, other))
	if err != nil {
		return err
	}
	if status != 409 {
		return fmt.Errorf("a second root at size %d: got %d %q, want 409", old, status, answer)
	}
	result.Fork409 = answer
	return json.NewEncoder(stdout).Encode(result)
}

func cmdCosigVerify(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("cosig-verify", flag.ContinueOnError)
	notePath := fs.String("note", "", "the checkpoint note, with its signature lines")
	logVkey := fs.String("log-vkey", "", "the log's Ed25519 verifier key")
	sshKey := fs.String("witness-ssh-key", "", "the witness's OpenSSH Ed25519 private key")
	wname := fs.String("witness-name", "", "the witness's name")
	if err := fs.Parse(args); err != nil {
		return usagef("%v", err)
	}
	data, err := os.ReadFile(*notePath)
	if err != nil {
		return configf("--note: %v", err)
	}
	logVerifier, err := note.NewVerifier(*logVkey)
	if err != nil {
		return configf("--log-vkey: %v", err)
	}
	raw, err := os.ReadFile(*sshKey)
	if err != nil {
		return configf("--witness-ssh-key: %v", err)
	}
	k, err := ssh.ParseRawPrivateKey(raw)
	if err != nil {
		return configf("--witness-ssh-key: %v", err)
	}
	var key ed25519.PrivateKey
	switch v := k.(type) {
	case ed25519.PrivateKey:
		key = v
	case *ed25519.PrivateKey:
		key = *v
	default:
		return configf("--witness-ssh-key: not an Ed25519 key")
	}
	wverifier, err := cosignatureVerifier(*wname, key)
	if err != nil {
		return configf("witness verifier: %v", err)
	}
	opened, err := note.Open(data, note.VerifierList(logVerifier, wverifier))
	if err != nil {
		return fmt.Errorf("the note does not open: %v", err)
	}
	var logSigned, cosigned bool
	for _, sig := range opened.Sigs {
		logSigned = logSigned || (sig.Name == logVerifier.Name() && sig.Hash == logVerifier.KeyHash())
		cosigned = cosigned || (sig.Name == wverifier.Name() && sig.Hash == wverifier.KeyHash())
	}
	if !logSigned || !cosigned {
		return fmt.Errorf("log signature verified: %v, cosignature verified: %v", logSigned, cosigned)
	}
	c, err := torchwood.ParseCheckpoint(opened.Text)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ok: %s at size %d, signed by the log and cosigned by %s\n", c.Origin, c.N, wverifier.Name())
	return nil
}
