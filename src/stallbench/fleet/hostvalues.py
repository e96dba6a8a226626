"""What a fleet host answers, checked before the controller uses it.

A host is on the other side of a trust boundary: the controller runs as root, and whatever a
host prints may be crafted. Values that later playbooks need (Ansible's job id and job file, the
Python the probe chose) must have the shape Ansible and the probe give them, and still travel
only as `!unsafe` extra vars (fleet/ansible.py), never pasted into a playbook.
"""

from __future__ import annotations

import re

# async_wrapper's job id: "j" + the controller's random number, "." + the wrapper's pid
JOB_ID_RE = re.compile(r"^j[0-9]{1,12}\.[0-9]{1,10}$")
# a Python for Ansible's modules: an absolute path of plain characters (the probe's failed_when
# uses the same pattern, so it holds no backslash)
PYTHON_PATH_PATTERN = "^/[-A-Za-z0-9._+/]{1,255}$"
PYTHON_PATH_RE = re.compile(PYTHON_PATH_PATTERN)
_PATH_RE = re.compile(r"^/[-A-Za-z0-9._+@/]{1,4000}$")


def shown(value: object) -> str:
    """A host's value in a message: repr, at most 120 characters."""
    text = repr(value)
    return text if len(text) <= 120 else f"{text[:117]}..."


def job_problem(job: object, results_file: object) -> str | None:
    """Why the start's job id or job file is not one Ansible's async wrapper gives (None: fine).
    The job file is `<async_dir>/<job id>`: an absolute plain path without `..`."""
    if not isinstance(job, str) or not JOB_ID_RE.match(job):
        return f"the host answered a job id that is not Ansible's ({shown(job)})"
    if not isinstance(results_file, str) or not _PATH_RE.match(results_file) \
            or "/../" in f"{results_file}/" or not results_file.endswith(f"/{job}"):
        return (f"the host answered a job file that is not Ansible's for job {job} "
                f"({shown(results_file)})")
    return None


def python_problem(path: str) -> str | None:
    """Why the probe's Python is not a plain absolute path (None: fine)."""
    if PYTHON_PATH_RE.match(path) and "/../" not in f"{path}/":
        return None
    return f"the host answered a Python that is not a plain absolute path ({shown(path)})"
