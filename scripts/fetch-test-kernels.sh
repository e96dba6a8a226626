#!/usr/bin/env bash
# Downloads the two newest ABIs of Debian's generic amd64 kernel (it has virtio-9p; cloud has
# not) into $STALLBENCH_TEST_KERNELS (default /var/cache/stallbench-test-kernels), kept between
# runs, and links them as older.deb and newer.deb there: the kernels of the kernel-variant
# tests (tests/vm/test_vm_*.py) and of examples/kernel-ab.toml. Needs root and apt; otherwise it
# says so and does nothing. scripts/install-system-deps.sh runs it.
set -euo pipefail
dir=${STALLBENCH_TEST_KERNELS:-/var/cache/stallbench-test-kernels}
[[ $(id -u) -eq 0 ]] || { echo "fetch-test-kernels: needs root (apt-get download)" >&2; exit 0; }
command -v apt-get >/dev/null 2>&1 || { echo "fetch-test-kernels: no apt-get" >&2; exit 0; }
newest() {
  find "$dir" -maxdepth 1 -regextype egrep \
    -regex '.*/linux-image-[0-9.]+-[0-9]+-amd64-unsigned_.*\.deb' 2>/dev/null | sort -V
}
mkdir -p "$dir"
if (($(newest | wc -l) < 2)); then
  [[ -n ${apt_updated:-} ]] || apt-get update -qq
  mapfile -t pkgs < <(apt-cache pkgnames linux-image-6. 2>/dev/null \
    | grep -E '^linux-image-[0-9.]+-[0-9]+-amd64-unsigned$' | sort -V | tail -n 2)
  ((${#pkgs[@]} > 0)) || { echo "no linux-image-*-amd64-unsigned package found" >&2; exit 0; }
  echo "downloading test kernels into $dir: ${pkgs[*]}" >&2
  (cd "$dir" && apt-get download -qq "${pkgs[@]}" 2>&1 | grep -v 'unsandboxed' >&2 || true)
fi
mapfile -t debs < <(newest | tail -n 2)
if ((${#debs[@]} == 2)); then
  ln -sfn "$(basename "${debs[0]}")" "$dir/older.deb"
  ln -sfn "$(basename "${debs[1]}")" "$dir/newer.deb"
  echo "$dir/older.deb -> $(basename "${debs[0]}"), newer.deb -> $(basename "${debs[1]}")" >&2
fi
