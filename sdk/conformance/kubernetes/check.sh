#!/usr/bin/env bash
# Checks sdk/conformance/quantity.json against Kubernetes' own
# resource.Quantity: builds main.go (a small oracle) with the
# k8s.io/apimachinery/pkg/api/resource and gopkg.in/inf.v0 sources from the
# Kubernetes source tree that scripts/ensure-apiserver.sh unpacks, asks it
# every vector, and fails on any answer that differs from the file's (a
# vector's "kubernetes" field, where the SDKs differ on purpose).
#
#   sdk/conformance/kubernetes/check.sh [KUBERNETES_SOURCE_DIR]
#
# Needs go (any 1.19+) and no network.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="${1:-$(ls -d "${NODESTATUS_CACHE:-$HOME/.cache/nodestatus}"/src/kubernetes-*/ 2>/dev/null | head -n1)}"
[ -d "$src/staging/src/k8s.io/apimachinery/pkg/api/resource" ] ||
  { echo "check.sh: no Kubernetes source tree (run scripts/ensure-apiserver.sh, or name one)" >&2; exit 1; }
command -v go >/dev/null || { echo "check.sh: go is needed" >&2; exit 1; }
mod="$(mktemp -d)"
trap 'rm -rf "$mod"' EXIT
mkdir -p "$mod/resource" "$mod/inf"
cp "$src"/staging/src/k8s.io/apimachinery/pkg/api/resource/{quantity,amount,math,scale_int,suffix}.go "$mod/resource/"
cp "$src"/vendor/gopkg.in/inf.v0/{dec,rounder}.go "$mod/inf/"
sed -i 's#"gopkg.in/inf.v0"#"oracle/inf"#' "$mod"/resource/*.go
cp "$here/main.go" "$mod/"
printf 'module oracle\n\ngo 1.19\n' >"$mod/go.mod"
(cd "$mod" && GOFLAGS=-mod=mod GOPROXY=off go build -o oracle .)
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
