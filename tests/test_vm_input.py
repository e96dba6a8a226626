"""Kernel-variant input: bad flags and plan keys are one line and exit 2 before anything
changes; a kernel that cannot work here fails its run with the reason, without booting."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_reliability_support import assert_one_line_exit_2, run_meta, sb
from test_vm_support import deb_release, guest_kernels, requires_vm


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


@requires_vm
def test_the_bzimage_release_is_the_packages_own():
    from stallbench.vm.kernel import resolve_kernel

    for deb, release in guest_kernels():
        kernel = resolve_kernel(str(deb))
        assert kernel.release == release == deb_release(deb)
        assert kernel.modules is not None and (kernel.modules / "modules.order").is_file()


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
    from stallbench.plan import load_plan

    plan = load_plan(Path(__file__).resolve().parent.parent / "examples" / "kernel-ab.toml")
    assert [v.kernel.endswith("-amd64-unsigned_6.1.170-3_amd64.deb") for v in plan.variants] \
        == [True, False]
    assert {(v.vm_cpus, v.vm_memory) for v in plan.variants} == {(2, 512 << 20)}
