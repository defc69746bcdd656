#!/usr/bin/env bash
# Builds the two FlashInfer bundles that the flashinfer_v0618 and flashinfer_v07 recipes of
# benchmarks/evidence/ carry to the lent H200 (no network there, no FlashInfer installed; see
# ../shared/device/README.md). Git-ignored, never committed:
#   .fi618/  flashinfer-python 0.6.18.post1 and the wheels the GPU image lacks, unpacked and
#            xz-packed (fisite.tar.xz), plus flashinfer/benchmarks and flashinfer/version.txt of
#            FI618_REF (default release-v0.6.18: the v0.6.18.post1 tag, the wheel's own driver,
#            is not in the mirror this was built from; its newest 0.6.18 driver is the release
#            branch at rc7)
#   .fi07/   flashinfer-python FI07_WHEEL (default 0.7.4) the same way, without the parts no
#            library-side row loads (the JIT sources of the cake_* kernels, experimental/, KDA and
#            GDN sources): the 0.7 wheel is 101 MB, the whole carry may be 64 MiB. 0.7 ships no
#            benchmarks/, so there is no driver for it here.
# Each gets a setup.sh to source on the GPU machine. The tracked tree plus one bundle fits one
# carry; carry one bundle per call.
#
# Usage, from the project root: bash benchmarks/make_flashinfer_bundles.sh FLASHINFER_GIT_DIR
# An existing fisite.tar.xz is kept (xz -9 of the 0.7 site takes about 7 minutes on 2 cores);
# delete it to rebuild.
set -euo pipefail
FI_GIT=${1:?usage: make_flashinfer_bundles.sh FLASHINFER_GIT_DIR}
FI618_REF=${FI618_REF:-release-v0.6.18}
FI07_WHEEL=${FI07_WHEEL:-0.7.4}
root=$(git rev-parse --show-toplevel)
# The companions the GPU image lacks (the image has torch 2.11, numpy, einops, ninja, requests,
# nvidia-ml-py, cuda-python); cupti-python must match its nvidia-cuda-cupti 13.0.x.
DEPS="apache-tvm-ffi==0.1.15.post2 nvidia-cudnn-frontend==1.32.0 cupti-python==13.0.1 pyelftools==0.33 cuda-tile==1.7.0"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

download() {  # download DEST SPEC...: CPython 3.12 x86_64 wheels, no dependencies
  local dest=$1; shift
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$dest" "$@"
}

bundle() {  # bundle DIR WHEEL_VERSION SITE_NAME [paths to strip under flashinfer/...]
  local dir=$1 version=$2 site=$3; shift 3
  mkdir -p "$root/$dir"
  if [ ! -f "$root/$dir/fisite.tar.xz" ]; then
    rm -rf "$tmp/whl" "$tmp/fisite" && mkdir -p "$tmp/whl" "$tmp/fisite"
    # shellcheck disable=SC2086
    download "$tmp/whl" "flashinfer-python==$version" $DEPS
    for w in "$tmp"/whl/*.whl; do unzip -q -o "$w" -d "$tmp/fisite"; done
    rm -rf "$tmp"/fisite/*.data
    for strip in "$@"; do rm -rf "$tmp/fisite/flashinfer/"$strip; done
    tar -C "$tmp" -cf - fisite | xz -9 -T0 > "$root/$dir/fisite.tar.xz.part"
    mv "$root/$dir/fisite.tar.xz.part" "$root/$dir/fisite.tar.xz"
  fi
  cat > "$root/$dir/setup.sh" <<EOF
# Source at the start of a command on the GPU machine: source $dir/setup.sh && ...
# Unpacks flashinfer-python $version and its companions into \${TMPDIR:-/tmp}/$site once and puts
# them on PYTHONPATH, with the Hopper JIT target and parallel builds. FLASHINFER_NO_DOWNLOAD is
# left as the caller has it: the run sets it to 1 for its worker when unset, and says so.
_b="\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)"
_site="\${TMPDIR:-/tmp}/$site"
if [ ! -f "\$_site/.installed" ]; then
  _x="\$(mktemp -d "\${TMPDIR:-/tmp}/$site.XXXX")" && tar -xJf "\$_b/fisite.tar.xz" -C "\$_x" \\
    && rm -rf "\$_site" && mv "\$_x/fisite" "\$_site" && rmdir "\$_x" && touch "\$_site/.installed"
fi
export PYTHONPATH="\$_site\${PYTHONPATH:+:\$PYTHONPATH}"
export FLASHINFER_CUDA_ARCH_LIST="\${FLASHINFER_CUDA_ARCH_LIST:-9.0a}" MAX_JOBS="\${MAX_JOBS:-16}"
export PYTHONUNBUFFERED=1
EOF
}

bundle .fi618 0.6.18.post1 fi-site-0.6.18
rm -rf "$root/.fi618/flashinfer" && mkdir -p "$root/.fi618/flashinfer"
git -C "$FI_GIT" archive "$FI618_REF" benchmarks version.txt | tar -x -C "$root/.fi618/flashinfer"
git -C "$FI_GIT" rev-parse "$FI618_REF" > "$root/.fi618/flashinfer/COMMIT"
bundle .fi07 "$FI07_WHEEL" fi-site-0.7 'cake_*_backend/csrc' experimental/cake experimental/b12x \
  experimental/qwen_3_5_block 'data/csrc/cake_*' data/csrc/kda data/csrc/gdn
du -sh "$root/.fi618" "$root/.fi07"
echo "tracked tree: $(git -C "$root" ls-files -z | xargs -0 du -cb | tail -1 | cut -f1) bytes; carry limit 67108864"
