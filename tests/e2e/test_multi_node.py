"""Beyond one host, for real: runs across two hosts of a test network (tests/helpers/netns.py), each with
its own network stack and hostname. cluster=slurm on a two-node SLURM cluster whose login host
serves MLflow (tests/helpers/slurm_cluster.py), cluster=torchrun with a torchrun on each of two hosts,
and the faults a run must survive: a node's ranks killed while measuring, and a requeue
(preemption) of a training job mid-epoch. docs/multi-node.md shows these commands."""

import csv
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from helpers import ROOT, TESTS, TINY, netns, slow_network
from helpers.digits import DIGITS_RUN, write_digits
from helpers.slurm_cluster import start_held, wait_until_held
from helpers.store import empty_store_in, runs_in

pytestmark = pytest.mark.slow  # SLURM daemons, an MLflow server, torchrun: real processes on two hosts

# What docs/multi-node.md shows; the tests add TINY's overrides (a 2-core CPU, seconds).
SLURM_RUN = "python -m rn50 cluster=slurm dist.nodes=2 dist.gpus_per_node=1 dist.accelerator=cpu mlflow.tracking_uri=http://login:5000"
SLURM_SWEEP = ("python -m rn50 --multirun cluster=slurm dist.nodes=1,2 dist.gpus_per_node=1 dist.accelerator=cpu "
               "mlflow.tracking_uri=http://login:5000")
TORCHRUN_DRY_RUN = ("python -m rn50 cluster=torchrun dist.nodes=2 dist.gpus_per_node=1 dist.accelerator=cpu "
                    "dist.interface=eth0 cluster.rdzv_endpoint=node1:29500 dry_run=true")
MLFLOW_SERVER = "launchers/mlflow_server.sh --host 198.18.29.10 --port 5000"
REQUEUE = "scontrol requeue"
FAILED_WITHIN_S = 60  # the bound from the kill of a node's ranks to the run's FAILED


def words(command: str) -> list:
    return command.split()[3:]  # what follows `python -m rn50`


def on_login(cluster, cwd: Path, args, **popen) -> subprocess.Popen:
    """`python -m rn50 ARGS` on the cluster's login host, as a user there would run it."""
    env = {**cluster.env, "PYTHONPATH": str(ROOT)}
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **popen}
    return subprocess.Popen(cluster.login([sys.executable, "-m", "rn50", *args]), cwd=cwd, env=env, text=True, **pipes)


def client(cluster) -> MlflowClient:
    """The login host's MLflow store, read from its file (the test runs on no host of the network)."""
    return MlflowClient(f"sqlite:///{cluster.mlflow_dir / 'mlflow.db'}")


def ranks_csv(cluster, run) -> list:
    """ranks.csv as uploaded to the server, which must match the one in the run's output directory."""
    uploaded = cluster.mlflow_dir / "artifacts" / run.info.experiment_id / run.info.run_id / "artifacts" / "ranks.csv"
    assert uploaded.read_text() == (Path(run.data.tags["output_dir"]) / "ranks.csv").read_text()
    return list(csv.DictReader(uploaded.open()))


def test_a_run_and_a_sweep_span_two_slurm_nodes(slurm_two_nodes, tmp_path):
    one, sweep = tmp_path / "one", tmp_path / "sweep"
    one.mkdir()
    sweep.mkdir()
    procs = {one: on_login(slurm_two_nodes, one, [*words(SLURM_RUN), *TINY, "mlflow.experiment_name=two-nodes"]),
             sweep: on_login(slurm_two_nodes, sweep, [*words(SLURM_SWEEP), *TINY, "mlflow.experiment_name=sweep"])}
    outputs = {cwd: proc.communicate() for cwd, proc in procs.items()}
    for cwd, proc in procs.items():
        assert proc.returncode == 0, outputs[cwd][1][-3000:]

    (run,) = runs_in(slurm_two_nodes.mlflow_dir, "two-nodes")
    assert run.info.status == "FINISHED"
    assert (run.data.tags["world_size"], run.data.tags["node_hostnames"]) == ("2", "0:node1,1:node2")
    assert [(r["rank"], r["node_rank"], r["hostname"]) for r in ranks_csv(slurm_two_nodes, run)] == [
        ("0", "0", "node1"), ("1", "1", "node2")]
    assert not (one / "mlflow.db").exists()  # everything went to the login host's server

    points = runs_in(slurm_two_nodes.mlflow_dir, "sweep")
    (parent,) = [r for r in points if r.data.tags.get("rn50.role") == "sweep"]
    children = {r.data.tags["dist"]: r for r in points if r is not parent}
    assert parent.info.status == "FINISHED" and sorted(children) == ["1n1g", "2n1g"]
    assert all(r.info.status == "FINISHED" for r in children.values())
    assert {r["hostname"] for r in ranks_csv(slurm_two_nodes, children["2n1g"])} == {"node1", "node2"}
    assert len(ranks_csv(slurm_two_nodes, children["1n1g"])) == 1


def job_of(cluster, nodes: int, folder: Path) -> str:
    """The id of the running job of `nodes` nodes that submitit submitted from `folder` (its
    .submitit/JOB_ID folders): a job of an earlier test may still be running (SLURM ends it a
    moment after its result is written), and the cluster is shared by the module's tests."""
    while True:
        listed = subprocess.run(cluster.login(["squeue", "--noheader", "--states=R", "--format=%i %D"]),
                                env=cluster.env, capture_output=True, text=True).stdout.split("\n")
        found = [line.split()[0] for line in listed
                 if line.split()[1:] == [str(nodes)] and (folder / line.split()[0]).is_dir()]
        if found:
            return found[0]
        time.sleep(0.2)


def ranks_of_job(cluster, host: str, job: str) -> list:
    """The pids of the job's ranks (submitit's worker processes) on a node."""
    found = []
    for pid in cluster.network.pids(host):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:  # gone already
            continue
        if b"submitit" in cmdline and f"SLURM_JOB_ID={job}".encode() in environ:
            found.append(pid)
    return found


def test_a_lost_node_fails_its_point_and_the_sweep_goes_on(slurm_two_nodes, tmp_path):
    # Enough measured steps for a window that lasts while node2's rank is killed in it.
    args = [w.replace("dist.nodes=1,2", "dist.nodes=2,1") for w in words(SLURM_SWEEP)]  # the lost point first
    proc = on_login(slurm_two_nodes, tmp_path, [*args, *TINY, "precision=fp32", "bench.steps=300",
                                                "mlflow.experiment_name=node-loss", f"hydra.sweep.dir={tmp_path}/sweep"],
                    stderr=subprocess.STDOUT)  # the sweep's log lines are on stdout, its errors on stderr
    job = job_of(slurm_two_nodes, 2, tmp_path / "sweep" / ".submitit")
    log = tmp_path / "sweep" / ".submitit" / job / f"{job}_0_log.err"
    while "rn50: measuring" not in (log.read_text() if log.exists() else ""):  # rank 0 is in the window
        assert proc.poll() is None, f"job {job}, {log}: " + proc.communicate()[0][-3000:]
        time.sleep(0.2)
    (victim,) = ranks_of_job(slurm_two_nodes, "node2", job)
    os.kill(victim, signal.SIGKILL)
    killed = time.monotonic()
    (point,) = [r for r in runs_in(slurm_two_nodes.mlflow_dir, "node-loss") if r.data.tags.get("dist") == "2n1g"]
    while client(slurm_two_nodes).get_run(point.info.run_id).info.status == "RUNNING":
        assert time.monotonic() - killed <= FAILED_WITHIN_S, f"run still RUNNING {FAILED_WITHIN_S} s after the kill"
        time.sleep(0.2)
    print(f"\nnode loss: run FAILED {time.monotonic() - killed:.1f} s after the kill", flush=True)  # pytest -s
    output = proc.communicate()[0]

    failed = client(slurm_two_nodes).get_run(point.info.run_id)
    assert failed.info.status == "FAILED" and failed.data.tags["failure"] == "lost_rank"
    assert "lost rank 1 on node2 (node 1)" in failed.data.tags["error"], failed.data.tags["error"]
    said = [line for line in output.splitlines() if "lost rank 1 on node2" in line]
    assert len(said) == 1 and failed.data.tags["error"] in said[0], output[-3000:]
    assert proc.returncode == 1  # a sweep with a failed point fails, after its other points and report
    points = runs_in(slurm_two_nodes.mlflow_dir, "node-loss")
    (parent,) = [r for r in points if r.data.tags.get("rn50.role") == "sweep"]
    (other,) = [r for r in points if r.data.tags.get("dist") == "1n1g"]
    assert other.info.status == "FINISHED" and parent.info.status == "FAILED"
    assert (tmp_path / "sweep" / "sweep_report.md").exists()
    assert not ranks_of_job(slurm_two_nodes, "node1", job)  # nothing of the failed job is left waiting


def test_a_requeued_training_job_resumes_into_the_same_run(slurm_two_nodes, tmp_path):
    digits = write_digits(tmp_path / "digits")
    out = tmp_path / "out"
    args = [*words(SLURM_RUN), *DIGITS_RUN, f"data.root={digits}", "train.epochs=2",
            "mlflow.experiment_name=requeue", f"hydra.run.dir={out}"]
    proc = on_login(slurm_two_nodes, tmp_path, args)
    while not (out / "checkpoints" / "last.ckpt").exists():  # epoch 1 is done; epoch 2 has begun
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        time.sleep(0.2)
    job = job_of(slurm_two_nodes, 2, out / ".submitit")
    subprocess.run(slurm_two_nodes.login([*REQUEUE.split(), job]), env=slurm_two_nodes.env, check=True)

    def running():
        assert proc.poll() is None, proc.communicate()[1][-3000:]

    wait_until_held(slurm_two_nodes, job, running)
    assert len((out / "epochs.jsonl").read_text().splitlines()) == 1  # stopped in epoch 2
    start_held(slurm_two_nodes, job)
    _, stderr = proc.communicate()
    assert proc.returncode == 0, stderr[-3000:]

    (run,) = runs_in(slurm_two_nodes.mlflow_dir, "requeue")
    assert run.info.status == "FINISHED" and run.data.tags["slurm_job_id"] == job
    assert (run.data.tags["requeued"], run.data.tags["resumed"]) == ("true", "true")
    assert "failure" not in run.data.tags and run.data.metrics["train/epochs"] == 2
    for key in ("train/loss", "time/epoch_s", "val/top1"):  # each epoch once
        assert sorted(m.step for m in client(slurm_two_nodes).get_metric_history(run.info.run_id, key)) == [1, 2]
    assert [line.split(",")[0] for line in (out / "epochs.jsonl").read_text().splitlines()] == [
        '{"epoch": 1', '{"epoch": 2']


def can_slow_links(net) -> bool:
    """Whether tc's token bucket can be set on a test host's eth0 here (tc installed, sch_tbf in the kernel)."""
    if shutil.which("tc") is None:
        return False
    tried = subprocess.run(net.argv("node1", ["tc", "qdisc", "add", "dev", "eth0", "root", *slow_network.TBF]),
                           capture_output=True, text=True)
    if tried.returncode == 0:
        subprocess.run(net.argv("node1", ["tc", "qdisc", "del", "dev", "eth0", "root"]), check=True)
    return tried.returncode == 0


def test_two_torchrun_nodes_on_two_network_stacks(tmp_path):
    """Two torchrun nodes on two hosts of the test network, whose links are held to 1 Gbit/s as the measured
    windows begin (helpers.slow_network, tc's token bucket, where tc can): the all-reduce timed after the
    windows is then slower than the one timed before the first step, and the run says its network changed."""
    with netns.network_of(["node1", "node2"]) as net:
        slowed = can_slow_links(net)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}  # torchrun
        printed = subprocess.run([sys.executable, "-m", "rn50", *words(TORCHRUN_DRY_RUN), *TINY], cwd=tmp_path,
                                 env=env, capture_output=True, text=True)
        assert printed.returncode == 0, printed.stderr[-2000:]
        commands = {line.split(":")[0]: line.split(": ", 1)[1] for line in printed.stdout.splitlines()
                    if line.startswith("node ")}
        assert sorted(commands) == ["node 0", "node 1"] and commands["node 0"] == commands["node 1"]
        assert "--rdzv-endpoint=node1:29500" in commands["node 0"] and " dist.interface=eth0 " in commands["node 0"]
        command = commands["node 0"] + (" profiler._target_=helpers.slow_network.SlowNetwork" if slowed else "")
        empty_store_in(tmp_path)  # rank 0 records it; both nodes see it
        nodes = [subprocess.Popen(net.argv(host, ["sh", "-c", command]), cwd=tmp_path, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for host in ("node1", "node2")]
        outputs = [node.communicate()[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], outputs[0][-2000:] + outputs[1][-2000:]
    (run,) = runs_in(tmp_path)
    assert run.info.status == "FINISHED"
    assert (run.data.tags["world_size"], run.data.tags["cluster"]) == ("2", "torchrun")
    assert run.data.params["dist.interface"] == "eth0"
    ranks = list(csv.DictReader(open(Path(run.data.tags["output_dir"]) / "ranks.csv")))
    # The rendezvous numbers the nodes in the order they join: either host may be node 0.
    assert [(r["rank"], r["node_rank"]) for r in ranks] == [("0", "0"), ("1", "1")]
    assert sorted(r["hostname"] for r in ranks) == ["node1", "node2"]
    assert all(float(r["process_cpu_pct"]) > 0 for r in ranks)
    if not slowed:
        pytest.skip("the run crossed the two hosts; tc could not slow their links here, so no network change was tried")
    m = run.data.metrics
    assert run.data.tags["network_changed"] == "true", m
    assert m["comm/allreduce_ms"] > m["comm/allreduce_before_ms"] * 1.2
    assert any("the network changed during the run: the all-reduce took " in out for out in outputs)
