#!/usr/bin/env bash
# Installs everything a fresh machine lacks (Debian packages, the Python virtual environment) and
# builds Baton into build/. Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake pkg-config git patch
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev nlohmann-json3-dev libopenblas-dev libgtest-dev libgmock-dev libbenchmark-dev
  libpcre2-dev libicu-dev libyaml-cpp-dev libcli11-dev libcpp-httplib-dev libboost-dev libssl-dev prometheus-cpp-dev python3-venv
  # The fuzz build (scripts/fuzz.sh): clang, and libFuzzer with the sanitizer runtimes, which clang
  # only recommends.
  clang libclang-rt-14-dev
)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -r python_client/requirements-dev.txt
# The Python client's gRPC stubs, generated (never committed) into python_client/baton/v1/, then the
# client itself, editable.
.venv/bin/python python_client/generate_stubs.py
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -e python_client

# xgrammar's C++ core (structured outputs; third_party/CMakeLists.txt builds it): its source release
# from PyPI, pinned by hash, unpacked once into third_party/xgrammar/.
XGRAMMAR_DIR=third_party/xgrammar
if [ ! -f "$XGRAMMAR_DIR/xgrammar-0.2.9/include/xgrammar/xgrammar.h" ]; then
  rm -rf "$XGRAMMAR_DIR" && mkdir -p "$XGRAMMAR_DIR/download"
  .venv/bin/python -m pip download -q --disable-pip-version-check --no-deps --no-binary xgrammar \
    --require-hashes -r third_party/xgrammar-requirements.txt -d "$XGRAMMAR_DIR/download"
  tar -xzf "$XGRAMMAR_DIR/download/xgrammar-0.2.9.tar.gz" -C "$XGRAMMAR_DIR"
  # Our fixes to it, each explained at the top of its patch.
  for fix in third_party/xgrammar-0.2.9-*.patch; do
    patch -s -p1 -d "$XGRAMMAR_DIR/xgrammar-0.2.9" < "$fix"
  done
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${BATON_CMAKE_ARGS:-}
cmake --build build -j"$(nproc)"

# The tests' random-weight `tiny` Llama checkpoint, made once. (The embedded default model,
# models/kjv-4m, ships with the repository.)
if [ ! -f build/models/tiny/config.json ]; then
  .venv/bin/python scripts/make_checkpoint.py --shape tiny --out build/models/tiny
fi
