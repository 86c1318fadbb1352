#!/usr/bin/env bash
# Installs every Debian package rlx needs to build, test and benchmark, idempotently.
# Usage: scripts/install-deps.sh        (needs root or sudo; safe to run again)
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config git ca-certificates
  # core libraries
  libopenblas-dev nlohmann-json3-dev zlib1g-dev libicu-dev
  # rlx serve: the HTTP server (cpp-httplib)
  libcpp-httplib-dev
  # devices: OpenCL (PoCL runs it on the CPU here and in CI)
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd
  # devices: Vulkan (Mesa lavapipe runs it on the CPU; shaderc compiles GLSL to SPIR-V at run time)
  libvulkan-dev mesa-vulkan-drivers libshaderc-dev
  # devices: the directx device's D3D12 runtime compiles against these headers (it loads D3D12 at run time)
  directx-headers-dev
  # devices: rocm (HIP headers and runtime library; clang 19's AMDGPU backend and the ROCm device
  # libraries compile its generated code for gfx90a, gfx942 and gfx1100 without a GPU)
  libamdhip64-dev rocm-device-libs clang-19 lld-19
  # devices: oneapi (oneDNN primitives on its CPU engine)
  libdnnl-dev
  # devices: OpenGL 4.5 compute through headless EGL (Mesa llvmpipe)
  libegl-dev libgles-dev libopengl-dev libgl1-mesa-dri libgbm-dev
  # scientific: LAPACK(E) factorizations, SuiteSparse sparse direct solvers
  liblapacke-dev libsuitesparse-dev
  # distributed: Open MPI (TCP, shared memory) and UCX
  libopenmpi-dev openmpi-bin libucx-dev
  # ahead-of-time targets (docs/targets.md): Cortex-M cross compiler, its C library, QEMU to run the images
  gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm
  # ahead-of-time targets: Hexagon (clang's Hexagon target and ld.lld build it, qemu-hexagon runs it)
  clang-15 lld-15 llvm-15 qemu-user
  # ahead-of-time targets: FPGA (Verilator simulates the generated SystemVerilog, Yosys synthesizes it)
  verilator yosys
  # Python bindings
  python3-dev pybind11-dev python3-pybind11 python3-pytest
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # model formats
  libprotobuf-dev protobuf-compiler libonnx-dev
  # model formats: rten files (FlatBuffers: flatc and the header-only C++ runtime)
  flatbuffers-compiler libflatbuffers-dev
  # peers and test oracles (run with /usr/bin/python3)
  python3 python3-numpy python3-onnx python3-torch python3-sklearn python3-scipy python3-jinja2
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"
