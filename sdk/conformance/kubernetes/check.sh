#!/usr/bin/env bash
# Checks sdk/conformance/quantity.json against Kubernetes' own
# resource.Quantity: builds main.go (a small oracle) against
# k8s.io/apimachinery at the release that scripts/ensure-apiserver.sh builds
# (v0.37.2 for Kubernetes 1.37.2; NODESTATUS_K8S_VERSION names another), from
# the Go module cache that build filled (or the module proxy), asks it every
# vector, and fails on any answer that differs from the file's (a vector's
# "kubernetes" field, where the SDKs differ on purpose).
#
#   sdk/conformance/kubernetes/check.sh
#
# Needs Go 1.26 or newer.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "check.sh: go is needed" >&2; exit 1; }
version="${NODESTATUS_K8S_VERSION:-1.37.2}"
minor="${version#*.}"; minor="${minor%%.*}"
apimachinery="v0.$minor.${version##*.}"
mod="$(mktemp -d)"
trap 'rm -rf "$mod"' EXIT
cp "$here/main.go" "$mod/"
printf 'module oracle\n\ngo 1.26\n\nrequire k8s.io/apimachinery %s\n' "$apimachinery" >"$mod/go.mod"
(cd "$mod" && GOFLAGS=-mod=mod go build -o oracle . 2>&1) >&2
python3 - "$here/../quantity.json" "$mod/oracle" <<'PY'
import json, subprocess, sys
vectors = json.load(open(sys.argv[1]))
reqs, want = [], []
for v in vectors["parse"]:
    reqs.append({"parse": v["input"]})
    k = v.get("kubernetes", v["canonical"])
    want.append({"error": True} if k == "refused" else {"canonical": k, "millis": v["millis"]})
for v in vectors["invalid"]:
    reqs.append({"parse": v["input"]})
    want.append({"canonical": v["kubernetes"]} if "kubernetes" in v else {"error": True})
for v in vectors["format"]:
    reqs.append({"millis": v["millis"], "format": v["format"]})
    want.append({"canonical": v["canonical"]})
out = subprocess.run([sys.argv[2]], input="".join(json.dumps(r) + "\n" for r in reqs),
                     capture_output=True, text=True, check=True).stdout.splitlines()
bad = checked = 0
for req, w, line in zip(reqs, want, out):
    got = json.loads(line)
    if "error" in got and "error" not in w and "millis" in req:
        continue  # beyond int64 milli-units, which NewMilliQuantity cannot take
    if w.get("error"):
        ok = "error" in got
    else:
        ok = "error" not in got and got["canonical"] == w["canonical"]
        # MilliValue() is an int64: past it Kubernetes' answer wraps.
        if ok and "millis" in w and abs(int(w["millis"])) < 2**63:
            ok = got["millis"] == w["millis"]
    checked += 1
    if not ok:
        bad += 1
        print(f"differs from Kubernetes: {json.dumps(req)}: file says {json.dumps(w)}, Kubernetes {json.dumps(got)}")
print(f"{checked - bad} passed, {bad} failed")
sys.exit(1 if bad else 0)
PY
