"""Fleet mode: one plan over many hosts through Ansible, one comparison at the end.

(planhosts.py, beside plan.py: the plan's `hosts` and `boot` keys, shape only)
inventory   the inventory (ansible-inventory --list) and which variants run on which host
subplan     each host's part of the plan as TOML, split into boot segments (A B A B)
ansible     generated playbooks run by ansible-playbook, results read from its JSON callback
pull        pulled run directories -> RESULTS/<variant>/<workload>/<n>, host and boot id recorded
orchestrate preflight, start (one async task), one status check, pull, cleanup, per host
labels      `variant@host`: how compare and check tell hosts apart (no Ansible needed)
deploy      `stallbench deploy`: this controller's stallbench and its dependencies as wheels,
            installed into a venv on each host with pip --no-index

Nothing here imports Ansible: it is run as a program (`ansible-playbook`), from the
optional extra `stallbench[fleet]`.
"""
