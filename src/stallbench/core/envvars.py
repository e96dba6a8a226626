"""Every environment variable stallbench reads or sets for the programs it starts, and what it
does: the man page's ENVIRONMENT (cli/docs.py) is made from this table, and
tests/cli/test_cli_docs_env.py checks that every name the source reads is here."""

from __future__ import annotations

GUEST_ACCEL = "STALLBENCH_GUEST_ACCEL"     # the host tells a kernel variant's guest its accelerator

READ = {
    "STALLBENCH_RESULTS": "the results directory when --results is not given (default "
                          "./results)",
    "STALLBENCH_STATE_DIR": "where the cleanup journals live, a folder of this user's alone "
                            "(default: the first usable of /run/stallbench, "
                            "/var/lib/stallbench, $XDG_RUNTIME_DIR/stallbench, "
                            "~/.cache/stallbench/state)",
    "STALLBENCH_KERNEL_CACHE": "where kernel packages are unpacked for kernel variants (default "
                               "/var/cache/stallbench/kernels as root, ~/.cache/... otherwise)",
    "STALLBENCH_VM_ACCEL": "kvm or tcg: skip the KVM probe of kernel variants and use this "
                           "accelerator",
    "STALLBENCH_VM_BOOT_TIMEOUT": "seconds a guest may take to boot (default 60 under KVM, "
                                  "120 under TCG)",
    "STALLBENCH_VM_TIMEOUT": "seconds a guest run may take in all (default: twice its warm-up "
                             "and duration, plus 600)",
    "STALLBENCH_WHEEL_CACHE": "where deploy keeps the wheels it made (default "
                              "/var/cache/stallbench/wheels as root, ~/.cache/stallbench/wheels "
                              "otherwise)",
    "STALLBENCH_NO_C_LOOP": "1: the workers' Python loops instead of the compiled C loop",
    GUEST_ACCEL: "set by the host in a kernel variant's guest: the accelerator it "
                              "runs under (tcg: the perf monitors keep off the scheduler's "
                              "code patching)",
    "XDG_CACHE_HOME": "the compiled C loop and other caches go under it (default ~/.cache)",
    "XDG_RUNTIME_DIR": "the cleanup journals go under it where /run and /var/lib are not "
                       "writable",
    "NO_COLOR": "set and not empty: no colour in the text report (--color always still "
                "colours)",
    "TERM": "dumb: no colour in the text report with --color auto",
    "GITHUB_STEP_SUMMARY": "check appends its markdown headline to this file (GitHub Actions "
                           "sets it)",
    "ANSIBLE_HOST_KEY_CHECKING": "False: a fleet run says once that SSH host keys are not "
                                 "checked",
}
# set by stallbench for a `bisect --git --build CMD` command
SET_FOR_BUILD = {
    "KBUILD_OUTPUT": "the build directory (plain make builds out of tree there)",
    "STALLBENCH_KERNEL_DIR": "install modules under $STALLBENCH_KERNEL_DIR/lib/modules/",
    "STALLBENCH_COMMIT": "the commit being built",
    "STALLBENCH_GUEST_CONFIG": "the kernel config fragment a guest needs",
}
