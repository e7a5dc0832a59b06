#!/usr/bin/env bash
# Builds what a GPU machine runs, here, and packs it with its shared libraries into one directory (and
# a .tar.gz of it) for a machine that has the NVIDIA driver but none of our Debian libraries and no
# package registry:
#
#   scripts/gpu_bundle.sh [--arch 90] [--build-dir build-gpu] [--jobs 2] [--cpu-flags -march=x86-64-v3]
#
# 1. configures --build-dir with -DBATON_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=<arch> (the kernels'
#    SASS; the arches really compiled are read back from the build and printed: the top-level
#    CMakeLists.txt may pin its own list) and portable CPU flags (-march=native would tie the CPU
#    kernels to this machine's CPU);
# 2. builds every test executable that has `gpu` cases (baton_add_split_test in tests/**), the baton
#    CLI and baton_gpu_bench, and asks ctest for the exact `gpu` cases (ctest -L gpu);
# 3. packs bin/, lib/ and run.sh (scripts/gpu_bundle_run.sh) into <build-dir>/bundle/baton-gpu-bundle.
#
# Libraries (lib/): every library `ldd` resolves for those binaries, glibc and its loader included,
# because the binaries link Debian 12's libstdc++, which needs glibc 2.36: run.sh starts each binary
# through the bundled loader (lib/ld-linux-x86-64.so.2 --library-path ...), so the target's glibc
# does not matter. Not carried: the driver (libcuda.so.1, libnvidia-*: the target's own, found
# through its ld.so cache), and the CUDA toolkit's cuBLAS, cuBLASLt and NCCL (about 54 + 542 + 218 MB,
# over the bundle's size limit): run.sh finds those on the target (its CUDA toolkit, or PyTorch's
# nvidia-* wheels) and says which one is missing. The CUDA runtime (libcudart, 0.7 MB) is carried.
# The sonames needed from the target are listed in bundle/NEEDS_FROM_TARGET.
set -euo pipefail
cd "$(dirname "$0")/.."

arch=90
build_dir=build-gpu
jobs=2
cpu_flags="-march=x86-64-v3"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --arch) arch="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --cpu-flags) cpu_flags="$2"; shift 2 ;;
    *) echo "gpu_bundle.sh: unknown argument $1 (see the header of scripts/gpu_bundle.sh)" >&2; exit 2 ;;
  esac
done

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
echo "gpu_bundle.sh: configuring $build_dir (CUDA arch $arch, CPU flags $cpu_flags)" >&2
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DBATON_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DBATON_NATIVE_FLAGS="$cpu_flags" "${launcher[@]}" >/dev/null
built_arches=$(grep -rhoE "arch=compute_[0-9]+,code=\[?[a-z_0-9,]+\]?" "$build_dir"/kernels/CMakeFiles/*/flags.make \
  | sed -E 's/.*code=\[?([a-z_0-9,]+)\]?/\1/' | tr ',' '\n' | grep '^sm_' | sort -u | tr '\n' ' ')
echo "gpu_bundle.sh: kernels compiled for: ${built_arches:-?}" >&2
if [[ " $built_arches " != *" sm_$arch "* ]]; then
  echo "gpu_bundle.sh: sm_$arch is not among them: CMakeLists.txt sets its own CMAKE_CUDA_ARCHITECTURES" >&2
  exit 1
fi

# The executables holding `gpu` cases: every baton_add_split_test, and any test labelled gpu.
mapfile -t tests < <(grep -rhoE "baton_add_split_test\([a-z0-9_]+" tests --include=CMakeLists.txt \
  | sed 's/.*(//' | sort -u)
targets=("${tests[@]}" baton baton_gpu_bench)
echo "gpu_bundle.sh: building ${targets[*]}" >&2
cmake --build "$build_dir" -j"$jobs" --target "${targets[@]}" >/dev/null

bundle_root="$build_dir/bundle"
bundle="$bundle_root/baton-gpu-bundle"
rm -rf "$bundle" "$bundle_root/baton-gpu-bundle.tar.gz"
mkdir -p "$bundle/bin" "$bundle/lib"

# bin/: the CLI, the benchmark, the test executables (stripped: symbols are not needed there).
binaries=("$build_dir/bin/baton" "$build_dir/bin/baton_gpu_bench")
for t in "${tests[@]}"; do
  binaries+=("$(find "$build_dir/tests" -type f -name "$t" -perm -u+x -print -quit)")
done
for b in "${binaries[@]}"; do
  strip --strip-unneeded -o "$bundle/bin/$(basename "$b")" "$b"
done

# tests.tsv: <executable> TAB <gtest filter of its gpu cases>, from ctest's own list.
ctest --test-dir "$build_dir" -L gpu --show-only=json-v1 | python3 -c '
import json, os, sys
cases = {}
for t in json.load(sys.stdin)["tests"]:
    exe, flt = t["command"][0], next(a for a in t["command"] if a.startswith("--gtest_filter="))
    cases.setdefault(os.path.basename(exe), []).append(flt.split("=", 1)[1])
for exe in sorted(cases):
    print(exe + "\t" + ":".join(cases[exe]))
print(sum(len(v) for v in cases.values()), "gpu cases in", len(cases), "executables", file=sys.stderr)
' > "$bundle/tests.tsv"

# lib/: what ldd resolves, less the driver and the big CUDA libraries (found on the target).
is_from_target() {
  case "$1" in
    libcuda.so*|libnvidia-*|libcublas.so*|libcublasLt.so*|libnccl.so*) return 0 ;;
    *) return 1 ;;
  esac
}
: > "$bundle/NEEDS_FROM_TARGET"
for b in "${binaries[@]}"; do
  while read -r name arrow path _; do
    [[ "$arrow" == "=>" && -f "$path" ]] || continue
    if is_from_target "$name"; then
      echo "$name" >> "$bundle/NEEDS_FROM_TARGET"
    else
      cp -L -n "$path" "$bundle/lib/$name"
    fi
  done < <(ldd "$b")
  # The loader, as the binary names it (PT_INTERP).
  # (awk reads to the end: an early exit would kill ldd with SIGPIPE, which pipefail reports.)
  interp=$(ldd "$b" | awk '/ld-linux/ && !seen {print $1; seen = 1}')
  cp -L -n "$interp" "$bundle/lib/ld-linux-x86-64.so.2"
done
sort -u -o "$bundle/NEEDS_FROM_TARGET" "$bundle/NEEDS_FROM_TARGET"

cp scripts/gpu_bundle_run.sh "$bundle/run.sh"
cp benchmarks/gpu/transformers_baseline.py "$bundle/"
chmod +x "$bundle/run.sh"
{
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo '+dirty')"
  echo "cuda: $(grep -ho 'CMAKE_CUDA_COMPILER_VERSION "[^"]*"' "$build_dir"/CMakeFiles/*/CMakeCUDACompiler.cmake \
    | sed -n '1s/.*"\(.*\)"/\1/p')"
  echo "kernels: $built_arches"
  echo "needs from the target: $(tr '\n' ' ' < "$bundle/NEEDS_FROM_TARGET")"
} > "$bundle/BUILD_INFO"
tar -C "$bundle_root" -czf "$bundle_root/baton-gpu-bundle.tar.gz" baton-gpu-bundle
echo "gpu_bundle.sh: $bundle: $(du -sh "$bundle" | cut -f1) ($(ls "$bundle/lib" | wc -l) libraries);" \
  "$bundle_root/baton-gpu-bundle.tar.gz: $(du -h "$bundle_root/baton-gpu-bundle.tar.gz" | cut -f1)" >&2
