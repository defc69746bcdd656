#!/usr/bin/env bash
# Pack .devbundle/ (made by ../shared/device/make_bundle.sh) into .devslim/, small enough to carry
# to the lent GPU machine beside the working tree (the carry limit is 64 MiB in all, and the
# bundle's wheels are 34 MB as wheels): the wheels' installed files as one xz archive, unpacked on
# the GPU machine into $TMPDIR/fi-site, plus the driver's benchmarks/ and its version.txt.
# Nothing here is committed (.devslim/ goes into .git/info/exclude).
#
#   FI_TAG=release-v0.6.18 FI_WHEEL=0.6.18.post1 bash ../shared/device/make_bundle.sh FI_GIT_DIR
#   bash benchmarks/make_devslim.sh FI_GIT_DIR [FI_TAG]
# then on the GPU machine: source .devslim/setup.sh && ... --flashinfer_repo .devslim/flashinfer
set -euo pipefail
FI_GIT=${1:?usage: make_devslim.sh FLASHINFER_GIT_DIR [TAG]}
TAG=${2:-${FI_TAG:-release-v0.6.18}}
root=$(git rev-parse --show-toplevel)
B="$root/.devbundle" S="$root/.devslim"
[ -d "$B/whl" ] || { echo "make_devslim.sh: no $B/whl; run make_bundle.sh first" >&2; exit 2; }
grep -qx '/.devslim/' "$root/.git/info/exclude" 2>/dev/null || echo '/.devslim/' >> "$root/.git/info/exclude"
site=$(mktemp -d); trap 'rm -rf "$site"' EXIT
# A wheel is a zip of its installed files (these have no scripts, and only pyelftools has a .data
# folder, of scripts); unzipping works whatever this machine's Python version is.
for w in "$B"/whl/*.whl; do python3 -m zipfile -e "$w" "$site"; done
rm -rf "$site"/*.data
rm -rf "$S"; mkdir -p "$S/flashinfer"
tar -cJf "$S/fisite.tar.xz" -C "$site" .
cp -r "$B/flashinfer/benchmarks" "$S/flashinfer/"
git -C "$FI_GIT" show "$TAG:version.txt" > "$S/flashinfer/version.txt"
cat > "$S/setup.sh" <<'SH'
# Source at the start of a command on the GPU machine: source .devslim/setup.sh && ...
_s="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
_site="${TMPDIR:-/tmp}/fi-site"
if [ ! -f "$_site/.installed" ]; then
  mkdir -p "$_site" && tar -xJf "$_s/fisite.tar.xz" -C "$_site" && touch "$_site/.installed"
fi
export PYTHONPATH="$_site${PYTHONPATH:+:$PYTHONPATH}"
export FLASHINFER_CUDA_ARCH_LIST="${FLASHINFER_CUDA_ARCH_LIST:-9.0a}" MAX_JOBS="${MAX_JOBS:-16}"
export FLASHINFER_NO_DOWNLOAD=1 PYTHONUNBUFFERED=1 FLASHINFER_REPO="${FLASHINFER_REPO:-$_s/flashinfer}"
SH
du -sh "$S"
echo "carry .devslim; start each command with: source .devslim/setup.sh &&"
