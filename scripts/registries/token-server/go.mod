// The dependencies of distribution's own token server
// (github.com/docker/distribution/contrib/token-server, release v2.8.3),
// pinned: that release has no go.mod, so without this file each build would
// take the newest version of each. Built by scripts/ensure-registries.sh.
module nodestatus.invalid/token-server

go 1.26.0

require (
	github.com/docker/distribution v2.8.3+incompatible
	github.com/docker/libtrust v0.0.0-20160708172513-aabc10ec26b7
	github.com/gorilla/mux v1.8.1
	github.com/sirupsen/logrus v1.10.2
	golang.org/x/crypto v0.59.0
)
