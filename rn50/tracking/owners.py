"""Who owns a RUNNING run: the launcher that opened it, recorded in its tags (host, pid, start), so
that a run whose launcher ended without closing it (SIGKILL, a crash, an out-of-memory kill) does not
stay RUNNING for good. The next rn50 command on the same store closes such runs of its host as
KILLED with failure=launcher_lost, and so does a rank that sees its launcher gone (rn50/rank/run.py).
A run whose launcher ran on another host waits for a command there: this host cannot see that process.
"""

import socket
from typing import Dict, List

from rn50 import owner
from rn50.tracking import store

PID_TAG, STARTED_TAG = "launcher_pid", "launcher_started"  # with launch_host, the host


def owner_tags() -> Dict[str, str]:
    """This process as the owner of the runs it opens."""
    me = owner.me()
    return {"launch_host": me["host"], PID_TAG: me["pid"], STARTED_TAG: me["started"]}


def close_orphans(uri: str) -> List[str]:
    """Close as KILLED, with failure=launcher_lost, every RUNNING run in the store whose launcher ran
    on this host and has ended; their ids."""
    client = store.open_client(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    if not experiments:
        return []
    host = socket.gethostname().replace("'", "")
    runs = store.search_runs(client, experiments, f"attributes.status = 'RUNNING' and tags.launch_host = '{host}'")
    closed = []
    for run in runs:
        tags = run.data.tags
        launcher = {"host": tags.get("launch_host"), "pid": tags.get(PID_TAG, ""), "started": tags.get(STARTED_TAG, "")}
        if PID_TAG not in tags or owner.alive(launcher) is not False:  # logged before owners were, or alive
            continue
        store.end_run(uri, run.info.run_id, ok=False, killed=True, tags={
            "failure": "launcher_lost", "error": f"its launcher ({owner.describe(launcher)}) ended without closing it"})
        closed.append(run.info.run_id)
    return closed
