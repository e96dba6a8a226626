"""Kernel-variant input: bad flags and plan keys are one line and exit 2 before anything
changes; a kernel that cannot work here fails its run with the reason, without booting."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from reliability_support import assert_one_line_exit_2, run_meta, sb
from vm_support import deb_release, guest_kernels, requires_vm

pytestmark = pytest.mark.guest


@pytest.mark.parametrize("args, needle", [
    (["--vm-cpus", "2"], "--vm-cpus and --vm-memory only make sense with --kernel"),
    (["--vm-memory", "1G"], "only make sense with --kernel"),
    (["--kernel", "/nonexistent/vmlinuz"], "--kernel /nonexistent/vmlinuz: no such file"),
    (["--kernel", "/etc/hostname", "--vm-cpus", "0"], "--vm-cpus: expected a whole number"),
    (["--kernel", "/etc/hostname", "--vm-memory", "64M"], "too little for a guest"),
    (["--kernel", "/etc/hostname", "--dir", "/tmp"], "leave out --dir"),
])
def test_bad_kernel_flags_are_one_line_exit_2(tmp_path, args, needle):
    out = sb("run", "randread", "--results", str(tmp_path / "r"), "--duration", "1", *args,
             state=tmp_path / "state")
    assert_one_line_exit_2(out, needle)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("variant, needle", [
    ('vm_memory = "1G"', "plan.toml:4: variants[0].vm_memory: only makes sense with kernel"),
    ('kernel = "/etc/hostname"\nvm_cpus = "two"', "plan.toml:5: variants[0].vm_cpus: expected a"),
    ('kernel = "/etc/hostname"\nvm_memory = "100M"', "variants[0].vm_memory: 100 MiB is too"),
    ('kernel = "/etc/hostname"\ndir = "/tmp"', "variants[0].dir: a kernel variant runs on"),
    ('kernel = "/nowhere/bzImage"', "--kernel /nowhere/bzImage: no such file"),
])
def test_bad_kernel_plan_keys_are_one_line_exit_2(tmp_path, variant, needle):
    plan = tmp_path / "plan.toml"
    plan.write_text(f'workload = "randread"\n[[variants]]\nname = "k"\n{variant}\n')
    out = sb("run", "--plan", str(plan), "--results", str(tmp_path / "r"),
             state=tmp_path / "state", cwd=tmp_path)
    assert_one_line_exit_2(out, needle)
    assert not (tmp_path / "r").exists()


def _not_kernels(tmp_path: Path) -> dict[str, Path]:
    fake_deb = tmp_path / "linux-image-fake.deb"
    fake_deb.write_text("not a package\n")
    other_ar = tmp_path / "libfoo.a"
    other_ar.write_bytes(b"!<arch>\nfoo.o/          0           0     0     644     4         `\n"
                         b"\x7fELF")
    empty = tmp_path / "empty-tree"
    empty.mkdir()
    return {"/etc/passwd": Path("/etc/passwd"), "deb": fake_deb, "ar": other_ar, "dir": empty}


@pytest.mark.parametrize("kind, needle", [
    ("/etc/passwd", "--kernel /etc/passwd: not an x86 bzImage (no boot header)"),
    ("deb", "linux-image-fake.deb: not a Debian package"),
    ("ar", "libfoo.a: not a Debian package"),
    ("dir", "empty-tree: no boot/vmlinuz-* or bzImage in it"),
])
def test_a_file_that_is_no_kernel_is_bad_input_before_anything_starts(tmp_path, kind, needle):
    """Issue 23 item 18: known from the file's first bytes, so one line and exit 2 (it was a
    failed run, exit 1, after the results directory and the run were made)."""
    kernel = _not_kernels(tmp_path)[kind]
    out = sb("run", "randread", "--results", str(tmp_path / "r"), "--duration", "1",
             "--kernel", str(kernel), state=tmp_path / "state")
    assert_one_line_exit_2(out, needle)
    assert not (tmp_path / "r").exists()


def _mem_total() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no MemTotal")


@requires_vm
def test_a_guest_bigger_than_this_machine_is_bad_input_before_anything_starts(tmp_path):
    """--vm-memory 1T with a real kernel: QEMU failed at boot ("cannot set up guest memory");
    now one line naming this machine's memory (from /proc/meminfo), flag and plan key alike."""
    deb, _release = guest_kernels()[-1]
    total_gib = _mem_total() / (1 << 30)
    out = sb("run", "randread", "--results", str(tmp_path / "r"), "--duration", "1",
             "--kernel", str(deb), "--vm-memory", "1T", state=tmp_path / "state")
    line = assert_one_line_exit_2(out, "--vm-memory 1024 GiB: this machine has ")
    assert f"{total_gib:.1f} GiB in all" in line or f"{total_gib:.0f} GiB in all" in line
    plan = tmp_path / "plan.toml"
    plan.write_text(f'workload = "randread"\n[[variants]]\nname = "k"\nkernel = "{deb}"\n'
                    f'vm_memory = "{int(total_gib) + 1}G"\n')
    out = sb("run", "--plan", str(plan), "--results", str(tmp_path / "r"),
             state=tmp_path / "state", cwd=tmp_path)
    assert_one_line_exit_2(out, f"--vm-memory {int(total_gib) + 1} GiB: this machine has")
    assert not (tmp_path / "r").exists()


@requires_vm
def test_the_bzimage_release_is_the_packages_own():
    from stallbench.vm.kernel import resolve_kernel

    for deb, release in guest_kernels():
        kernel = resolve_kernel(str(deb))
        assert kernel.release == release == deb_release(deb)
        assert kernel.modules is not None and (kernel.modules / "modules.order").is_file()


@requires_vm
def test_the_test_kernels_boot_through_their_pvh_entry(tmp_path):
    """Both test kernels are xz-compressed and built with CONFIG_PVH (their own config says
    so): the ELF kernel is taken out of the bzImage and binutils' readelf finds its PVH entry
    note (Xen note type 0x12, XEN_ELFNOTE_PHYS32_ENTRY). Until the xz payload was read as one
    stream (it ends with its size, which lzma.decompress took for a second, broken stream)
    every boot here went through the decompressor: ~4.5 s more per guest under TCG."""
    from stallbench.vm.kernel import pvh_vmlinux, resolve_kernel

    for deb, release in guest_kernels():
        kernel = resolve_kernel(str(deb))
        config = (kernel.image.parent / f"config-{release}").read_text().splitlines()
        assert "CONFIG_PVH=y" in config and "CONFIG_KERNEL_XZ=y" in config, release
        elf = pvh_vmlinux(kernel, tmp_path)
        assert elf is not None, release
        notes = subprocess.run(["readelf", "-n", str(elf)], capture_output=True, text=True,
                               check=True).stdout
        assert re.search(r"Xen\s+0x[0-9a-f]+\s+Unknown note type: \(0x00000012\)", notes), \
            notes


@requires_vm
def test_a_kernel_without_9p_fails_its_run_before_booting(tmp_path):
    """An unpacked kernel tree whose config has no virtio-9p (like Debian's cloud flavour):
    the run fails naming the option; nothing boots and nothing is left."""
    from stallbench.vm.kernel import resolve_kernel

    deb, release = guest_kernels()[-1]
    kernel = resolve_kernel(str(deb))
    tree = tmp_path / "tree"
    (tree / "boot").mkdir(parents=True)
    shutil.copyfile(kernel.image, tree / "boot" / f"vmlinuz-{release}")
    config = Path(kernel.image.parent / f"config-{release}").read_text().splitlines()
    (tree / "boot" / f"config-{release}").write_text("\n".join(
        line for line in config if "9P" not in line) + "\n# CONFIG_NET_9P is not set\n")
    results, state = tmp_path / "r", tmp_path / "state"
    out = sb("run", "randread", "--variant", "no9p", "--results", str(results), "--kernel",
             str(tree), "--duration", "1", "--no-progress", state=state)
    assert out.returncode == 1, out.stdout + out.stderr
    meta = run_meta(results / "no9p" / "randread" / "1")
    assert meta["status"] == "failed"
    assert meta["reason"].startswith(f"{release}: CONFIG_NET_9P_VIRTIO is not set")
    assert not list((results / ".work").glob("stallbench-vm-*"))
    assert not list(state.glob("journal-*.json"))


def test_the_kernel_example_plan_loads():
    from stallbench.plan.planfile import load_plan

    plan = load_plan(Path(__file__).resolve().parents[2] / "examples" / "kernel-ab.toml")
    # the links scripts/fetch-test-kernels.sh makes to the two kernels the tests download
    assert [Path(v.kernel).name for v in plan.variants] == ["older.deb", "newer.deb"]
    assert {(v.vm_cpus, v.vm_memory) for v in plan.variants} == {(2, 512 << 20)}
    assert plan.iterations == 3 and plan.workload_options["direct"] is True
