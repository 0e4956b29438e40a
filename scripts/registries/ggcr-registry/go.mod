// go-containerregistry's registry with the referrers API on (main.go), at
// the release that cosign v3.1.3 builds (so its Go build cache is shared).
// Built by scripts/ensure-registries.sh.
module nodestatus.invalid/ggcr-registry

go 1.26

require github.com/google/go-containerregistry v0.21.7
