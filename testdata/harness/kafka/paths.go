package kafka

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// InstallHint names the make target that installs what this harness needs.
const InstallHint = "run `make deps-kafka` (or `make deps`) from the repository root"

var (
	rootOnce sync.Once
	rootDir  string
	rootErr  error
)

// RepoRoot is the directory holding go.mod, found from the working directory up.
func RepoRoot() (string, error) {
	rootOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			rootErr = err
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				rootDir = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				rootErr = errors.New("kafka harness: no go.mod above the working directory")
				return
			}
			dir = parent
		}
	})
	return rootDir, rootErr
}

// LibDir is where `make deps-kafka` copies the Apache Kafka jars.
func LibDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "testdata", ".cache", "kafka", "lib"), nil
}

// Classpath returns the Kafka jars' classpath, or an error that says how to
// install them.
func Classpath() (string, error) {
	lib, err := LibDir()
	if err != nil {
		return "", err
	}
	for _, want := range []string{"kafka_2.13-*.jar", "kafka-tools-*.jar", "kafka-clients-*.jar", "log4j-slf4j2-impl-*.jar"} {
		m, _ := filepath.Glob(filepath.Join(lib, want))
		if len(m) == 0 {
			return "", fmt.Errorf("kafka harness: Apache Kafka jars missing (%s not in %s): %s", want, lib, InstallHint)
		}
	}
	return filepath.Join(lib, "*"), nil
}

// JavaPath finds java or explains how to get it.
func JavaPath() (string, error) {
	p, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("kafka harness: java not found on PATH: %s", InstallHint)
	}
	return p, nil
}

// KcatPath finds kcat or explains how to get it.
func KcatPath() (string, error) {
	p, err := exec.LookPath("kcat")
	if err != nil {
		return "", fmt.Errorf("kafka harness: kcat not found on PATH: %s", InstallHint)
	}
	return p, nil
}
