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
  [zsh]=zsh
  [groff]=groff-base
)
missing=()
for tool in "${!need[@]}"; do
  if [[ $tool == /* ]]; then [[ -e $tool ]] && continue
  else command -v "$tool" >/dev/null 2>&1 && continue; fi
  missing+=("${need[$tool]}")
done
if ((${#missing[@]} == 0)); then exit 0; fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [[ $(id -u) -ne 0 ]]; then
  echo "missing system packages (install as root): ${missing[*]}" >&2
  exit 0
fi
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
