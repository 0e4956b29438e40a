// Unit tests of {{name}}, natively (./build.sh runs them): go test .
package main

import (
	"strings"
	"testing"

	"nodestatus.dev/sdk"
)

func TestMajorMinor(t *testing.T) {
	if v, ok := majorMinor("6.1.0-18-amd64"); !ok || v != "6.1" {
		t.Errorf("%q %v", v, ok)
	}
	if _, ok := majorMinor("linux"); ok {
		t.Error("linux has no version")
	}
}

// Run returns the setter's part: only the fields it sets.
func TestThePartIsTheLabel(t *testing.T) {
	defer nodestatus.UseFakeHost(nodestatus.NewFakeHost())()
	part, err := nodestatus.Run(setter{}, `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(*part, `{"metadata":{"labels":{"`+Label+`":"`) {
		t.Errorf("%s", *part)
	}
}
