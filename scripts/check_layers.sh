#!/usr/bin/env bash
# The layers of the code (DESIGN.md, "Layers of the code"): the include graph runs one way,
#   kernels/ < runtime/ < scheduler/ < cli/ and benchmarks/,
# and no library includes tests/. Prints every include that runs the wrong way; exits 1 if any.
# Registered with ctest as `layers`, so CI keeps it true.
set -uo pipefail
cd "$(dirname "$0")/.."

status=0
# forbid DIR PATTERN WHY: no source under DIR includes a path matching PATTERN.
forbid() {
  local hits
  hits=$(grep -rnE "^\s*#\s*include\s+\"($2)" "$1" \
           --include='*.h' --include='*.cc' --include='*.cu' --include='*.cuh' 2>/dev/null)
  if [ -n "$hits" ]; then
    echo "layers: $3:"
    echo "$hits" | sed 's/^/  /'
    status=1
  fi
}

forbid kernels    'runtime/|scheduler/|benchmarks/|cli/|tests/' "kernels/ includes a higher layer"
forbid runtime    'scheduler/|benchmarks/|cli/|tests/'          "runtime/ includes a higher layer"
forbid scheduler  'benchmarks/|cli/|tests/'                     "scheduler/ includes a higher layer"
forbid benchmarks 'tests/'                                      "benchmarks/ includes tests/"
forbid cli        'tests/'                                      "cli/ includes tests/"
# Only the binary's own sources include cli/: the subcommands under cli/ and `baton bench`'s.
hits=$(grep -rlE '^\s*#\s*include\s+"cli/' kernels runtime scheduler benchmarks \
         --include='*.h' --include='*.cc' 2>/dev/null | grep -v '^benchmarks/bench/bench_command.cc$')
if [ -n "$hits" ]; then
  echo "layers: a library includes cli/:"
  echo "$hits" | sed 's/^/  /'
  status=1
fi

[ "$status" -eq 0 ] && echo "layers: the include graph runs one way"
exit "$status"
