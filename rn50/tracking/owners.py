"""Who owns a RUNNING run: the launcher that opened it, recorded in its tags (host, pid, start), so
that a run whose launcher ended without closing it (SIGKILL, a crash, an out-of-memory kill) does not
stay RUNNING for good. The next rn50 command on the same store closes such runs of its host as
KILLED with failure=launcher_lost, and so does a rank that sees its launcher gone (rn50/rank/run.py).
A run whose launcher ran on another host waits for a command there: this host cannot see that process.
"""

import socket
from typing import Dict, List

from rn50 import owner
from rn50.tracking.client import open_client
from rn50.tracking.runs import end_run, search_runs

# The owner's fields (rn50/owner.py) as tags: launch_host is its host.
TAGS = {"host": "launch_host", "pid": "launcher_pid", "started": "launcher_started", "boot": "launcher_boot",
        "pidns": "launcher_pidns"}
PID_TAG = TAGS["pid"]


def owner_tags() -> Dict[str, str]:
    """This process as the owner of the runs it opens."""
    return {TAGS[k]: v for k, v in owner.me().items()}


def launcher(tags: Dict[str, str]) -> Dict[str, str]:
    """The owner a run's tags record."""
    return {k: tags.get(tag, "") for k, tag in TAGS.items()}


def close_orphans(uri: str) -> List[str]:
    """Close as KILLED, with failure=launcher_lost, every RUNNING run in the store whose launcher ran
    on this host and has ended; their ids."""
    client = open_client(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    if not experiments:
        return []
    host = socket.gethostname().replace("'", "")
    runs = search_runs(client, experiments, f"attributes.status = 'RUNNING' and tags.launch_host = '{host}'")
    closed = []
    for run in runs:
        if PID_TAG not in run.data.tags or owner.alive(launcher(run.data.tags)) is not False:
            continue  # logged before owners were, alive, or this host cannot tell
        now = client.get_run(run.info.run_id)  # as it is now: a resume may have taken it on since the search
        if now.info.status != "RUNNING" or owner.alive(launcher(now.data.tags)) is not False:
            continue
        end_run(uri, run.info.run_id, ok=False, killed=True, tags={
            "failure": "launcher_lost",
            "error": f"its launcher ({owner.describe(launcher(now.data.tags))}) ended without closing it"})
        closed.append(run.info.run_id)
    return closed
