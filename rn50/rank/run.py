"""One rank of a run: build the model and data, fit, measure; rank 0 gathers every rank's result.

cluster=local: the launcher (rn50/launcher/pool.py) keeps these processes warm, `python -m rn50.rank
--serve`, and sends them one run after another; what crosses is in rn50/wire.py. Under torchrun and SLURM, `python -m rn50`
is a rank itself and calls `run_rank`. Either way a rank never touches MLflow: rank 0
returns the RankResults, and whoever owns the run records them (rn50/results/summary.py).
"""

import argparse
import dataclasses
import gc
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import List, Optional

import pytorch_lightning as pl
import torch
from omegaconf import OmegaConf

from rn50 import STARTED, console
from rn50.config.compilation import compile_mode
from rn50.config.schema import Accelerator, TrainName
from rn50.config.reads import decided, typed, world_size
from rn50.distributed import peers
from rn50.errors import error_line, failure_kind
from rn50.measure.device import gpu_tags, software_tags
from rn50.options.components import Options
from rn50.rank import batch_search, training, warm_compile
from rn50.rank.progress import Progress
from rn50.rank.throughput import ThroughputCallback
from rn50.rank.trainer import build_trainer, local_gpu, profiling_callbacks, started_by_rn50
from rn50.recipe import optimizers
from rn50.recipe.model import ResNetModule, flops_per_image
from rn50.recipe.precision import set_math_mode
from rn50.tracking.runs import close_orphans
from rn50.wire import POOL_ENV, Done, Failed, RankResult, Ready, Task, rank_log



def load_config(text: str):
    """The run's config as the launcher decided it, read-only in the rank too."""
    cfg = typed(text)
    OmegaConf.set_readonly(cfg, True)
    return cfg


def run_rank(cfg, out: Path, options: Optional[Options] = None) -> Optional[List[RankResult]]:
    """This process's rank of the run; rank 0 returns every rank's result, the others None.
    The run's options are built here, once (or handed in by a launcher that built them), and
    handed to what uses them."""
    received = time.time()  # the start's launch stage ends: this rank holds its run (rn50/measure/timing.py)
    options = options or Options.of(cfg)
    peers.use_interface(cfg)  # before any process group starts (batch search's, Lightning's)
    if cfg.dist.accelerator == Accelerator.gpu:
        # Lightning does so only inside fit: the stream is made before
        torch.cuda.set_device(local_gpu(cfg, options))
    warm_compile.prepare(cfg)  # torch 2.11's warm start with kernel tuning
    # The pipeline's stream holds everything the rank runs on the device, from the model's first
    # weights on, so no work crosses streams unordered.
    with options.data.training_stream(cfg):
        if cfg.train.name == TrainName.accuracy:
            results = training.run_rank(cfg, out, options)
        else:
            results = measure_rank(cfg, out, options, received)
    warm_compile.remember(cfg)  # its graphs compiled and ran: the next run loads them in-process
    return results


def measure_rank(cfg, out: Path, options: Options, received: float) -> Optional[List[RankResult]]:
    """A throughput run's rank: warm-up, the timed windows, then the profilers. received: when the rank got
    its run (time.time()), the end of its start's first stage."""
    global _batch_chosen
    device_type = "cuda" if cfg.dist.accelerator == Accelerator.gpu else "cpu"
    set_math_mode(options.precision.tf32)
    search = batch_search.search_batch(cfg, device_type, options)  # data.batch_size=auto
    if search is not None:  # the run goes on at the batch chosen
        cfg = decided(cfg, {"data.batch_size": search.batch})
        _batch_chosen = search.batch  # what a failure of this task names (failure)
    pl.seed_everything(cfg.seed, verbose=False)
    model = ResNetModule(cfg.model, cfg.optim, optimizers.fused_default(cfg.optim, device_type))
    throughput = ThroughputCallback(cfg.bench, cfg.telemetry, device_type, cfg.data.batch_size)
    first_profiled = throughput.timer.total_steps
    extras = profiling_callbacks(cfg, device_type, first_profiled, out, options)
    profiled = options.profiler.steps(cfg)  # after the measured windows
    world = world_size(cfg)
    # After the throughput callback, whose window-edge sync comes first; reads the host clock only.
    progress = Progress(cfg.bench.warmup_steps, cfg.bench.steps * cfg.bench.repeats, cfg.data.batch_size, world,
                        total_after=profiled, compiling=compile_mode(cfg.model) is not None)
    trainer = build_trainer(cfg, device_type, [throughput, progress, *extras], first_profiled + profiled, out,
                            options)
    pooled = _ready_at is not None  # this process's own start (rn50.STARTED) ends the launcher's preflight
    throughput.started.update(preflight=STARTED if pooled else None, ranks=_ready_at, launch=received,
                              build=time.time())
    trainer.fit(model, datamodule=options.data.build(cfg, endless=True))  # as pipelines.build
    ranks = throughput.ranks
    if ranks is None:
        return None
    # Rank 0's result carries the run's own facts beside its measurements: what the batch search and the
    # profilers measured and wrote, the software and GPU, and the network's FLOPs.
    metrics, files = {}, []
    if search is not None:
        metrics.update(batch_search.search_metrics(search))
        files.append(batch_search.write_csv(out / "batch_search.csv", search))
    for callback in extras:
        metrics.update(getattr(callback, "metrics", dict)())
        files += getattr(callback, "artifacts", list)()
    zero = dataclasses.replace(
        ranks[0], metrics=metrics, files=files,
        env_tags={**software_tags(), **gpu_tags(device_type), "accelerator": device_type},
        flops_per_image=flops_per_image(cfg.model.arch.value, cfg.model.num_classes, cfg.data.image_size))
    return [zero, *ranks[1:]]


def leave_process_group() -> None:
    """Leave together and tear the process group down: a rank exiting with its communicator
    threads alive can abort (SIGABRT) and fail a finished run."""
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


def release_memory() -> None:
    """Between two runs of a warm rank: nothing of the last run stays on the device."""
    torch._dynamo.reset()  # compiled graphs, and the CUDA-graph pools they hold
    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    dali = sys.modules.get("rn50.data.dali")  # loaded by an earlier data=dali run: DALI keeps its own pools
    if dali is not None:
        dali.release_memory()


def failure(exc: BaseException, cfg, log: Optional[Path]) -> Failed:
    """The task's failure in one line, which names the log that holds the traceback; out of memory
    names the batch."""
    message = error_line(str(exc)) or type(exc).__name__
    kind = failure_kind(message)
    if kind == "oom" and cfg is not None:
        batch = cfg.data.batch_size if _batch_chosen is None else _batch_chosen
        message = f"oom at data.batch_size={batch}: {message}"
    if log is not None:
        message += f"; traceback in {log}"
    return Failed(time.time(), message, kind, str(log) if log else None)


# When this pool rank had imported torch and made its CUDA context (serve), the end of a run's start's first stage
# if the run began before it; None in a rank that rn50's pool did not start.
_ready_at: Optional[float] = None
# The store of the task this rank runs, while it runs one: where its launcher's run is.
_task_store: Optional[str] = None
# The batch data.batch_size=auto's search chose for the task this rank runs: its config, which the launcher
# sent, still says auto (the rank hands the batch on in a copy of its own).
_batch_chosen: Optional[int] = None
CLOSE_S = 10.0  # how long a rank whose launcher is gone tries to close its run


def answer(task: Task, broken: Optional[BaseException] = None) -> "Done | Failed":
    """One run's reply, with this rank's output in its log (wire.rank_log).
    broken: an error from before the task came (the warm-up), reported as the task's."""
    global _task_store, _batch_chosen
    out, cfg = Path(task.out), None
    with console.stderr_to(rank_log(out, int(os.environ.get("RANK", 0)))) as log:
        try:
            if broken is not None:
                raise broken
            cfg = load_config(task.config)
            _task_store = cfg.mlflow.tracking_uri
            return Done(run_rank(cfg, out))
        except Exception as exc:
            traceback.print_exc()  # into the log
            return failure(exc, cfg, log)
        finally:
            _task_store = _batch_chosen = None


def exit_with_parent(poll_s: float = 1.0) -> None:
    """End this process soon after the one that started it ends, whatever this one is doing: a
    launcher killed outright (SIGKILL, a crash) never leaves its ranks running. Rank 0 first closes
    the run that launcher left open (rn50/tracking/runs.py close_orphans), for at most CLOSE_S."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        if _task_store and os.environ.get("RANK", "0") == "0":
            closer = threading.Thread(target=close_orphans, args=(_task_store,), daemon=True)
            closer.start()
            closer.join(CLOSE_S)
        os._exit(1)  # nobody waits for a result; its DataLoader workers follow their own parent

    threading.Thread(target=watch, name="rn50-parent-watch", daemon=True).start()


def serve(fd: int) -> None:
    """A pool rank: warm up, then run each task the launcher sends until it says stop."""
    conn = Connection(fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the launcher owns Ctrl-C and stops the ranks

    def say(reply) -> bool:
        try:
            conn.send(reply)
            return True
        except OSError:  # the launcher is gone (it stopped at an error of its own)
            return False

    global _ready_at
    broken = None
    try:
        if torch.cuda.is_available():  # the CUDA context is made before the first task arrives
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
            torch.zeros(1, device="cuda")
    except Exception as exc:  # a busy or missing device: the first task's answer says so
        broken = exc
    _ready_at = time.time()
    if broken is None and not say(Ready()):
        return
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):  # the launcher is gone
            return
        if task is None:
            break
        reply = answer(task, broken)
        if not say(reply) or not isinstance(reply, Done):
            return  # a failed rank's state is suspect: the launcher starts fresh ones
        release_memory()
    leave_process_group()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m rn50.rank")
    parser.add_argument("--serve", action="store_true", help=f"run tasks sent over the socket in ${POOL_ENV}")
    parser.add_argument("--task", help="a pickled task to run once (under a profiler's own launcher)")
    parser.add_argument("--result", help="where --task writes its pickled reply")
    args = parser.parse_args(argv)
    console.quiet()
    started_by_rn50()
    exit_with_parent()
    if args.serve:
        serve(int(os.environ[POOL_ENV]))
        return
    reply = answer(pickle.loads(Path(args.task).read_bytes()))
    Path(args.result).write_bytes(pickle.dumps(reply))
    sys.exit(0 if isinstance(reply, Done) else 1)


if __name__ == "__main__":
    main()
