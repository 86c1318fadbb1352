#!/usr/bin/env bash
# The package test (ctest -L package): installs the build tree into <build>/package-test/prefix,
# then builds tests/package/consumer against it twice, through find_package(rlx) and through
# pkg-config (rlx.pc), outside the source folder, and runs both; and runs the installed program.
# Usage: tests/package/run.sh SOURCE_DIR BINARY_DIR
set -euo pipefail
src=$1
bin=$2
work=$bin/package-test
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix

cmake --install "$bin" --prefix "$prefix" > "$work/install.log"
test -f "$prefix/include/rlx/compile.h"
test -f "$prefix/lib/cmake/rlx/rlxConfig.cmake"
"$prefix/bin/rlx" devices

# find_package(rlx), configured and built outside the source folder
cp -r "$src/tests/package/consumer" "$work/consumer"
gen=()
command -v ninja > /dev/null && gen=(-G Ninja)
cmake -S "$work/consumer" -B "$work/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
      > "$work/configure.log"
cmake --build "$work/build" > "$work/build.log"
"$work/build/consumer"

# pkg-config
if command -v pkg-config > /dev/null; then
  flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs rlx)
  c++ -O1 "$work/consumer/main.cpp" -o "$work/consumer-pc" $flags
  "$work/consumer-pc"
else
  echo "package test: pkg-config not installed; the rlx.pc check did not run"
fi
# the Python package, when it was built
py=$(ls -d "$prefix"/lib/python3*/dist-packages 2> /dev/null | head -n 1 || true)
if [ -n "$py" ] && [ -d "$py/rlx" ]; then
  (cd "$work" && PYTHONPATH="$py" /usr/bin/python3 -c "import rlx; assert any(d.name == 'cpu' and d.available for d in rlx.devices()); print('installed python package:', rlx.__file__)")
else
  echo "package test: the Python module was not built, so not installed; its check did not run"
fi
echo "package test: ok"
