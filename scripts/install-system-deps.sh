#!/usr/bin/env bash
# Installs the Debian packages that stallbench's tests and workloads use, when they are missing.
# Needs root (apt-get); without root it only says what is missing.
set -euo pipefail
declare -A need=(
  [fio]=fio
  [strace]=strace
  [mkfs.ext4]=e2fsprogs
  [mkfs.xfs]=xfsprogs
  [mkfs.btrfs]=btrfs-progs
  [losetup]=mount
  [/usr/lib/postgresql]=postgresql
  [chromium]=chromium
  [chromedriver]=chromium-driver
  [/usr/include/asm-generic/unistd.h]=linux-libc-dev
  [qemu-system-x86_64]=qemu-system-x86
  [dpkg-deb]=dpkg
  [/usr/sbin/sshd]=openssh-server
  [rsync]=rsync
  [zsh]=zsh
  [fish]=fish
  [groff]=groff-base
  [man]=man-db
  [/usr/sbin/kexec]=kexec-tools
  [cc]=gcc
  [/usr/include/unistd.h]=libc6-dev
  # bisect --git's default kernel build (src/stallbench/bisect/buildtools.py checks the same)
  [make]=make
  [flex]=flex
  [bison]=bison
  [bc]=bc
  [/usr/include/gelf.h]=libelf-dev
  # the profile and perfstat monitors
  [perf]=linux-perf
)
# Two guest kernels for the kernel-variant tests and examples/kernel-ab.toml, kept between runs.
fetch_test_kernels() {
  apt_updated=${apt_updated:-} "$(dirname "$0")/fetch-test-kernels.sh"
}
missing=()
for tool in "${!need[@]}"; do
  if [[ $tool == /* ]]; then [[ -e $tool ]] && continue
  else command -v "$tool" >/dev/null 2>&1 && continue; fi
  missing+=("${need[$tool]}")
done
# the guest's /init needs a static busybox (Debian's busybox package is dynamic)
if ! { [[ -x /bin/busybox ]] && ! ldd /bin/busybox >/dev/null 2>&1; }; then
  missing+=(busybox-static)
fi
if ((${#missing[@]} == 0)); then fetch_test_kernels; exit 0; fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [[ $(id -u) -ne 0 ]]; then
  echo "missing system packages (install as root): ${missing[*]}" >&2
  exit 0
fi
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# kexec-tools is for tests/fleet/test_fleet_kexec.py's guest only: never let it take over reboots here
echo "kexec-tools kexec-tools/load_kexec boolean false" | debconf-set-selections
apt-get update -qq
apt_updated=1
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fetch_test_kernels
