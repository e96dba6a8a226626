"""What `--mkfs-opts` and `--mount-opts` may say: option names from an allow-list per
filesystem, and no value that names a device or a path.

mkfs formats its first word that is not an option: `--mkfs-opts dev/sdz` made `mkfs.ext4 -F -q
dev/sdz /dev/loop0` format dev/sdz (relative to the working directory; the loop device became
a block count), and `-J device=`, `-l logdev=` or the mount option `journal_path=` name other
devices. So every word must be an option of that mkfs, or the value of the option before it;
values may not hold `/`, a device key (device=, logdev=, ...) or a device tag (UUID=, LABEL=,
...). The shape check (no filesystem known yet) refuses every word no filesystem's table could
read and every device-like value; `check_for_fs` applies the filesystem's own table. Both run
while the settings are read, before any loop device exists.
"""

from __future__ import annotations

import re
import shlex

from ..core.errors import UsageError

# option -> whether it takes a value (the next word, or attached: -b4096, --label=x)
_EXT = {"-b": True, "-C": True, "-c": False, "-D": False, "-e": True, "-E": True, "-F": False,
        "-g": True, "-G": True, "-i": True, "-I": True, "-j": False, "-J": True, "-K": False,
        "-L": True, "-m": True, "-N": True, "-o": True, "-O": True, "-q": False, "-r": True,
        "-S": False, "-t": True, "-T": True, "-U": True, "-v": False}
_XFS = {"-b": True, "-d": True, "-f": False, "-i": True, "-K": False, "-l": True, "-L": True,
        "-m": True, "-n": True, "-q": False, "-r": True, "-s": True}
_BTRFS = {"-d": True, "--data": True, "-m": True, "--metadata": True, "-n": True,
          "--nodesize": True, "-s": True, "--sectorsize": True, "-L": True, "--label": True,
          "-O": True, "--features": True, "-R": True, "--runtime-features": True, "-U": True,
          "--uuid": True, "-M": False, "--mixed": False, "-f": False, "--force": False,
          "-q": False, "--quiet": False, "-K": False, "--nodiscard": False, "--csum": True,
          "--checksum": True}
MKFS_OPTIONS = {"ext2": _EXT, "ext3": _EXT, "ext4": _EXT, "xfs": _XFS, "btrfs": _BTRFS}

_MOUNT_ANY = ("rw", "sync", "async", "dirsync", "atime", "noatime", "relatime", "norelatime",
              "strictatime", "nostrictatime", "lazytime", "nolazytime", "diratime",
              "nodiratime", "dev", "nodev", "suid", "nosuid", "exec", "noexec", "iversion",
              "noiversion", "mand", "nomand")
_MOUNT_EXT = ("acl", "noacl", "user_xattr", "nouser_xattr", "barrier", "nobarrier", "data",
              "commit", "errors", "journal_checksum", "nojournal_checksum",
              "journal_async_commit", "journal_ioprio", "delalloc", "nodelalloc",
              "auto_da_alloc", "noauto_da_alloc", "max_batch_time", "min_batch_time",
              "dioread_lock", "dioread_nolock", "discard", "nodiscard", "inode_readahead_blks",
              "stripe", "init_itable", "noinit_itable", "block_validity", "noblock_validity",
              "nombcache", "data_err", "grpid", "nogrpid", "bsdgroups", "sysvgroups", "resgid",
              "resuid", "sb", "nouid32", "orlov", "oldalloc", "debug", "quota", "noquota",
              "usrquota", "grpquota", "prjquota", "i_version", "dax")
_MOUNT_XFS = ("allocsize", "attr2", "noattr2", "discard", "nodiscard", "grpid", "nogrpid",
              "bsdgroups", "sysvgroups", "filestreams", "ikeep", "noikeep", "inode32",
              "inode64", "largeio", "nolargeio", "logbufs", "logbsize", "noalign",
              "norecovery", "nouuid", "noquota", "uquota", "usrquota", "quota", "uqnoenforce",
              "qnoenforce", "gquota", "grpquota", "gqnoenforce", "pquota", "prjquota",
              "pqnoenforce", "sunit", "swidth", "swalloc", "wsync", "dax")
_MOUNT_BTRFS = ("acl", "noacl", "autodefrag", "noautodefrag", "barrier", "nobarrier",
                "check_int", "clear_cache", "commit", "compress", "compress-force", "datacow",
                "nodatacow", "datasum", "nodatasum", "discard", "nodiscard", "enospc_debug",
                "noenospc_debug", "fatal_errors", "flushoncommit", "noflushoncommit",
                "max_inline", "norecovery", "rescan_uuid_tree", "skip_balance", "space_cache",
                "nospace_cache", "ssd", "ssd_spread", "nossd", "nossd_spread", "thread_pool",
                "treelog", "notreelog", "user_subvol_rm_allowed")
MOUNT_OPTIONS = {fs: frozenset(_MOUNT_ANY + extra) for fs, extra in (
    ("ext2", _MOUNT_EXT), ("ext3", _MOUNT_EXT), ("ext4", _MOUNT_EXT), ("xfs", _MOUNT_XFS),
    ("btrfs", _MOUNT_BTRFS))}

# keys of sub-options and mount options whose value is another device or a file
DEVICE_KEYS = frozenset({"device", "logdev", "rtdev", "name", "file", "journal_path",
                         "journal_dev", "usrjquota", "grpjquota", "subvol"})
_DEVICE_TAG_RE = re.compile(r"^(UUID|PARTUUID|LABEL|PARTLABEL|ID)=", re.I)
_HINT = "stallbench formats and mounts only the loop device it made"


def _value_problem(value: str) -> str | None:
    """Why an option's value names a device or path (None: it does not)."""
    for item in value.split(","):
        key, _, rest = item.partition("=")
        if "/" in item:
            return f"{value!r} names a path"
        if key.strip().lower() in DEVICE_KEYS:
            return f"{value!r} names another device or file ({key}=)"
        if _DEVICE_TAG_RE.match(item) or _DEVICE_TAG_RE.match(rest):
            return f"{value!r} names a device by its tag"
    return None


def _words(opts: str, what: str) -> list[str]:
    try:
        return shlex.split(opts)
    except ValueError as exc:
        raise UsageError(f"{what}: {opts!r} cannot be split into arguments ({exc})") from None


def _parse(words: list[str], table: dict[str, bool], what: str, mkfs: str) -> None:
    """Every word an option of `table` or its value; refuse the first that is neither."""
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if word.startswith("--") and len(word) > 2:
            name, attached, value = word.partition("=")
            if name not in table:
                raise UsageError(f"{what}: {name!r} is not an option {mkfs} takes here")
            if table[name] and not attached:
                if index >= len(words):
                    raise UsageError(f"{what}: {name} needs a value")
                value, index = words[index], index + 1
            elif attached and not table[name]:
                raise UsageError(f"{what}: {name} takes no value")
        elif word.startswith("-") and len(word) > 1:
            letters, value = word[1:], None
            for position, letter in enumerate(letters):
                flag = f"-{letter}"
                if flag not in table:
                    raise UsageError(f"{what}: {flag!r} is not an option {mkfs} takes here")
                if table[flag]:
                    value = letters[position + 1:]
                    if not value:
                        if index >= len(words):
                            raise UsageError(f"{what}: {flag} needs a value")
                        value, index = words[index], index + 1
                    break
        else:
            raise UsageError(f"{what}: {word!r} is no option of {mkfs}: a word that is not an "
                             f"option's value is taken as the device to format; {_HINT}")
        problem = value is not None and _value_problem(value)
        if problem:
            raise UsageError(f"{what}: {problem}; {_HINT}")


def _any_table() -> dict[str, bool]:
    """Every filesystem's options; an option takes a value if it does for any of them."""
    merged: dict[str, bool] = {}
    for table in MKFS_OPTIONS.values():
        for name, takes in table.items():
            merged[name] = merged.get(name, False) or takes
    return merged


def check_mkfs_words(opts: str, what: str = "--mkfs-opts", fs: str | None = None) -> None:
    """`opts` read as mkfs reads them: refused (UsageError) unless every word is an allowed
    option or its value and no value names a device or path; with `fs` None, by the options
    of any filesystem."""
    table = MKFS_OPTIONS[fs] if fs else _any_table()
    _parse(_words(opts, what), table, what, f"mkfs.{fs}" if fs else "mkfs")


def check_mount_words(opts: str, what: str = "--mount-opts", fs: str | None = None) -> None:
    """Each comma-separated mount option: allowed for `fs` (any filesystem's when None), and
    naming no device or path."""
    allowed = MOUNT_OPTIONS[fs] if fs else frozenset().union(*MOUNT_OPTIONS.values())
    for item in filter(None, opts.split(",")):
        key = item.partition("=")[0]
        if key not in allowed:
            raise UsageError(f"{what}: {key!r} is not a mount option stallbench passes to "
                             f"{fs or 'any filesystem'} (it allows the generic ones and each "
                             "filesystem's own that name no device or file)")
        problem = _value_problem(item)
        if problem:
            raise UsageError(f"{what}: {problem}; {_HINT}")
