#!/usr/bin/env bash
# Installs what the webgpu device runs on, into a git-ignored folder (build/webgpu by default,
# where a build configured in build/ looks; $RLX_WEBGPU_DIR points a process elsewhere):
# - Dawn, Google's WebGPU implementation, as the shared library of the npm package
#   bun-webgpu-linux-x64, pinned (src/backends/webgpu/webgpu_api.h declares its C API);
# - SwiftShader's Vulkan driver, which Dawn runs on here (Mesa's lavapipe lacks features Dawn
#   requires), from Debian's chromium-common package: downloaded and unpacked, not installed.
# Without network either step fails, and the webgpu device is then listed as unavailable with
# the reason (its tests fail in CI, where both are expected).
# Usage: scripts/install-webgpu.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/webgpu}
dawn_version=0.1.7
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

lib="$dir/npm/node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so"
if [ ! -f "$lib" ]; then
  if ! command -v npm > /dev/null; then
    echo "install-webgpu: npm is not installed (scripts/install-deps.sh installs it)" >&2
    exit 1
  fi
  npm install --prefix "$dir/npm" --no-audit --no-fund --no-save "bun-webgpu-linux-x64@$dawn_version" > /dev/null
fi

icd="$dir/swiftshader/usr/lib/chromium/vk_swiftshader_icd.json"
if [ ! -f "$icd" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # apt-get download needs the package lists, which a fresh machine may not have yet
  if ! (cd "$tmp" && apt-get download chromium-common > /dev/null 2>&1); then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
    (cd "$tmp" && apt-get download chromium-common > /dev/null 2>&1)
  fi
  deb=$(ls "$tmp"/chromium-common_*.deb)
  mkdir -p "$dir/swiftshader/extract"
  dpkg-deb -x "$deb" "$dir/swiftshader/extract"
  # keep only the driver and its manifest (the package is 30 MB of browser resources)
  mkdir -p "$dir/swiftshader/usr/lib/chromium"
  cp "$dir/swiftshader/extract/usr/lib/chromium/libvk_swiftshader.so" \
     "$dir/swiftshader/extract/usr/lib/chromium/vk_swiftshader_icd.json" "$dir/swiftshader/usr/lib/chromium/"
  rm -rf "$dir/swiftshader/extract"
  basename "$deb" > "$dir/swiftshader/VERSION"
fi
echo "install-webgpu: Dawn (bun-webgpu-linux-x64@$dawn_version) and SwiftShader ($(cat "$dir/swiftshader/VERSION")) in $dir"
