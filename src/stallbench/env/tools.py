"""Finding the system programs env/ runs (mkfs.*, losetup, mount), also with a user's PATH."""

from __future__ import annotations

import os
import shutil

from ..core.errors import UsageError

_SBIN = "/usr/local/sbin:/usr/sbin:/sbin:/usr/local/bin:/usr/bin:/bin"
PACKAGES = {"mkfs.ext2": "e2fsprogs", "mkfs.ext3": "e2fsprogs", "mkfs.ext4": "e2fsprogs",
            "dumpe2fs": "e2fsprogs", "mkfs.xfs": "xfsprogs", "mkfs.btrfs": "btrfs-progs",
            "losetup": "util-linux", "mount": "util-linux", "umount": "util-linux"}


def find_tool(name: str) -> str | None:
    path = os.environ.get("PATH", "") + ":" + _SBIN
    return shutil.which(name, path=path)


def tool(name: str) -> str:
    found = find_tool(name)
    if found is None:
        package = PACKAGES.get(name)
        hint = f" (install {package})" if package else ""
        raise UsageError(f"{name} not found{hint}")
    return found
