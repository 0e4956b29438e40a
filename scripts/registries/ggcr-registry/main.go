// ggcr-registry: go-containerregistry's registry (pkg/registry) with its
// OCI 1.1 referrers API turned on, over TLS, for the tests: a registry that
// answers GET /v2/<name>/referrers/<digest>, beside Debian's docker-registry
// 2.8, which does not. go-containerregistry's own cmd/registry and `crane
// registry serve` leave the API off (registry.WithReferrersSupport is not
// set), so this is their main with that option on and a TLS listener.
// In-memory: what is pushed is gone when it exits. No authentication.
//
// One fix of its answers: the OCI distribution spec says the 201 to an
// upload's closing PUT and to a manifest's PUT carries the Location of what
// was written; pkg/registry sends none, and oci-client (nodestatus's push)
// refuses an answer without it ("Registry did not return a location
// header"). withLocation adds it, from the Docker-Content-Digest the
// registry sends.
//
// Built by scripts/ensure-registries.sh.
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	cert := flag.String("tlscert", "", "TLS certificate (PEM); plain HTTP without it")
	key := flag.String("tlskey", "", "TLS key (PEM)")
	flag.Parse()

	listener, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("serving on %s", listener.Addr())
	s := &http.Server{
		ReadHeaderTimeout: 5 * time.Second,
		Handler: withLocation(registry.New(
			registry.WithReferrersSupport(true),
			registry.Logger(log.Default()),
		)),
	}
	if *cert != "" {
		log.Fatal(s.ServeTLS(listener, *cert, *key))
	}
	log.Fatal(s.Serve(listener))
}

// withLocation adds the Location header of a 201 to a PUT of
// /v2/<name>/blobs/uploads/<id> (/v2/<name>/blobs/<digest>) or of
// /v2/<name>/manifests/<ref> (/v2/<name>/manifests/<digest>) when the
// registry sent none.
func withLocation(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(&locationWriter{ResponseWriter: w, path: r.URL.Path}, r)
	})
}

type locationWriter struct {
	http.ResponseWriter
	path string
}

func (l *locationWriter) WriteHeader(status int) {
	h := l.Header()
	digest := h.Get("Docker-Content-Digest")
	if status == http.StatusCreated && h.Get("Location") == "" && digest != "" {
		if i := strings.Index(l.path, "/blobs/uploads/"); i >= 0 {
			h.Set("Location", l.path[:i]+"/blobs/"+digest)
		} else if i := strings.Index(l.path, "/manifests/"); i >= 0 {
			h.Set("Location", l.path[:i]+"/manifests/"+digest)
		}
	}
	l.ResponseWriter.WriteHeader(status)
}
