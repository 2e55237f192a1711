package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sigstore/sigstore-go/pkg/tuf"
)

// cmdTUF bootstraps from a TUF repository the way sigstore-go's clients do: from one root.json,
// it fetches and verifies the timestamp, snapshot and targets, then the named targets, and
// writes each verified target into --out. A test then verifies bundles with what it wrote.
func cmdTUF(args []string, stdout io.Writer) error {
	fs := newFlagSet("tuf")
	url := fs.String("url", "", "the repository's base URL (metadata at URL/, targets at URL/targets/)")
	rootPath := fs.String("root", "", "the trusted root.json to start from")
	cache := fs.String("cache", "", "the TUF client's cache directory")
	out := fs.String("out", "", "directory to write the fetched targets into")
	names, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if *url == "" || *rootPath == "" || *cache == "" || *out == "" || len(names) == 0 {
		return usagef("tuf needs --url, --root, --cache, --out and at least one TARGET name")
	}
	rootJSON, err := os.ReadFile(*rootPath)
	if err != nil {
		return configf("root %s: %v", *rootPath, err)
	}
	client, err := tuf.New(tuf.DefaultOptions().WithRoot(rootJSON).WithRepositoryBaseURL(*url).WithCachePath(*cache))
	if err != nil {
		return fmt.Errorf("TUF client: %w", err)
	}
	for _, name := range names {
		target, err := client.GetTarget(name)
		if err != nil {
			return fmt.Errorf("TUF target %s: %w", name, err)
		}
		path := filepath.Join(*out, name)
		if err := os.WriteFile(path, target, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		fmt.Fprintln(stdout, path)
	}
	return nil
}
