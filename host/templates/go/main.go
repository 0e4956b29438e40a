// {{name}}: a nodestatus setter. It labels the node with its kernel's
// major.minor version, read from a file; change Set to report what you
// need.
//
// A setter reads only the directories it asks for in its metadata and the
// operator grants (config.yaml holds the grant). Build, test and check it
// with ./build.sh.
package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"nodestatus.dev/sdk"
)

// Label is the label this setter sets.
const Label = "{{name}}.nodestatus.io/kernel"

// releaseFile is the file it reads, in the directory it asks for.
const releaseFile = "{{grant}}/osrelease"

var majorMinorRE = regexp.MustCompile(`^([0-9]+)\.([0-9]+)`)

// majorMinor is the kernel's "major.minor" from a release such as
// "6.1.0-18-amd64"; false when the release does not start with one.
func majorMinor(release string) (string, bool) {
	m := majorMinorRE.FindStringSubmatch(release)
	if m == nil {
		return "", false
	}
	return m[1] + "." + m[2], true
}

type setter struct{}

func (setter) Metadata() nodestatus.Metadata {
	return nodestatus.Metadata{
		Name:        "{{name}}",
		Version:     "0.1.0",
		Description: "labels the node with its kernel's major.minor version",
		// The directory of releaseFile; config.yaml grants it.
		Paths: []string{"{{grant}}"},
	}
}

func (setter) Set(node *nodestatus.Node) (*nodestatus.Part, error) {
	b, err := os.ReadFile(releaseFile)
	if err != nil {
		return nil, err
	}
	release := strings.TrimSpace(string(b))
	version, ok := majorMinor(release)
	if !ok {
		return nil, fmt.Errorf("cannot read a version from the kernel release %q", release)
	}
	part := node.Part()
	part.SetLabel(Label, version)
	return part, nil
}

func init() { nodestatus.Export(setter{}) }

// main is not called: the setter is a library that the host calls.
func main() {}
