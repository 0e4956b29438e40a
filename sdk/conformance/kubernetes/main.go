// Command oracle answers the quantity vectors with Kubernetes' own
// resource.Quantity: one JSON request a line on stdin, one answer a line on
// stdout. check.sh builds it against k8s.io/apimachinery at the release
// that scripts/ensure-apiserver.sh builds (v0.37.2).
//
//	{"parse": "1.5Gi"}                        -> {"millis": "...", "canonical": "1536Mi"}
//	{"millis": "1000000", "format": "BinarySI"} -> {"canonical": "1k"}
//
// A refused input answers {"error": "..."}.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
)

type request struct {
	Parse  *string `json:"parse"`
	Millis string  `json:"millis"`
	Format string  `json:"format"`
}

// canonical is the quantity written afresh: String() would return the
// caller's own spelling when Kubernetes cached it ("+1", "007").
func canonical(q resource.Quantity) string {
	q.Add(resource.Quantity{})
	return q.String()
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var r request
		if err := json.Unmarshal(in.Bytes(), &r); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		answer := map[string]string{}
		if r.Parse != nil {
			q, err := resource.ParseQuantity(*r.Parse)
			if err != nil {
				answer["error"] = err.Error()
			} else {
				answer["millis"] = fmt.Sprint(q.MilliValue())
				answer["canonical"] = canonical(q)
			}
		} else {
			m, err := strconv.ParseInt(r.Millis, 10, 64)
			if err != nil {
				answer["error"] = err.Error()
			} else {
				answer["canonical"] = canonical(*resource.NewMilliQuantity(m, resource.Format(r.Format)))
			}
		}
		if err := out.Encode(answer); err != nil {
			os.Exit(2)
		}
	}
}
