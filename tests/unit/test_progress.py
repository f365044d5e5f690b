"""Progress: plain lines off a terminal, a bar redrawn in place on one, a heartbeat through slow
steps, a line per sweep point."""

import io
import re
import time
from types import SimpleNamespace

import pytest
import pytorch_lightning as pl

from rn50.tools.fake_imagenet import make
from helpers.tiny_module import Tiny
from rn50.measure.meter import Meter
from rn50.measure.meter import point_line
from rn50.point.identity import sweep_points, sweep_size
from rn50.rank.progress import Progress


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def drive(progress, clock, steps, step_s=1.0, rank0=True):
    trainer = SimpleNamespace(is_global_zero=rank0)
    progress.on_train_start(trainer, None)
    for i in range(steps):
        clock.t += step_s
        progress.on_train_batch_end(trainer, None, None, None, i)
    progress.on_train_end(trainer, None)


def test_off_a_terminal_plain_lines_at_phase_changes_and_every_10_s():
    clock, out = FakeClock(), io.StringIO()
    progress = Progress(total_warmup=3, total_measured=30, batch_size=4, world_size=2,
                        stream=out, clock=clock, tty=False, heartbeat=False)
    drive(progress, clock, steps=33)
    assert out.getvalue().splitlines() == [
        "rn50: warm-up 0/3 steps",
        "rn50: warm-up 3/3 steps, 3 s",
        "rn50: measuring 0/30 steps",
        # 8 images a step (4 per device x 2 devices), one step a second; the time since the phase began
        "rn50: measuring 10/30 steps, 10 s, ~8.0 images/sec, ~20 s left",
        "rn50: measuring 20/30 steps, 20 s, ~8.0 images/sec, ~10 s left",
        "rn50: measuring 30/30 steps, 30 s, ~8.0 images/sec",
    ]


def test_fast_steps_print_no_more_lines():
    clock, out = FakeClock(), io.StringIO()
    progress = Progress(5, 10_000, batch_size=256, world_size=8, total_after=7, stream=out, clock=clock, tty=False,
                        heartbeat=False)
    drive(progress, clock, steps=5 + 10_000 + 7, step_s=0.01)  # 100 s measured: a line per 10 s
    lines = out.getvalue().splitlines()
    measuring = [l for l in lines if "measuring" in l]
    assert len(measuring) == 1 + 9 + 1, lines
    assert measuring[-1] == "rn50: measuring 10000/10000 steps, 1 min 40 s, ~204,800 images/sec"
    assert lines[-2:] == ["rn50: profiling 0/7 steps", "rn50: profiling 7/7 steps, 0 s"]


def test_on_a_terminal_one_line_redrawn_with_carriage_returns():
    clock, out = FakeClock(), io.StringIO()
    progress = Progress(2, 8, batch_size=32, world_size=1, stream=out, clock=clock, tty=True, heartbeat=False)
    drive(progress, clock, steps=10)
    text = out.getvalue()
    assert text.count("\n") == 2  # one finished line per phase
    warmup, measuring, _ = text.split("\n")
    assert warmup.startswith("\rrn50: warm-up [") and measuring.startswith("\rrn50: measuring [")
    frames = measuring.split("\r")[1:]
    assert len(frames) == 1 + 7 + 1  # start, each step (1 s apart, above the redraw interval), end
    assert "[" + "#" * 24 + "] 8/8 steps, 8 s, ~32.0 images/sec" in frames[-1]
    assert "4/8 steps, 4 s, ~32.0 images/sec, ~4 s left" in frames[4]


def test_other_ranks_print_nothing():
    clock, out = FakeClock(), io.StringIO()
    drive(Progress(2, 3, 4, 2, stream=out, clock=clock, tty=False, heartbeat=False), clock, steps=5, rank0=False)
    assert out.getvalue() == ""


def test_a_real_trainer_drives_it():
    out = io.StringIO()
    trainer = pl.Trainer(accelerator="cpu", max_steps=5, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         callbacks=[Progress(2, 3, batch_size=2, world_size=1, stream=out, tty=False)])
    trainer.fit(Tiny())
    lines = out.getvalue().splitlines()
    assert lines[0] == "rn50: warm-up 0/2 steps" and lines[1].startswith("rn50: warm-up 2/2 steps, ")
    assert lines[2] == "rn50: measuring 0/3 steps"
    assert lines[3].startswith("rn50: measuring 3/3 steps, ") and lines[3].endswith("images/sec")


def test_point_line():
    summary = {"arch": "resnet50", "precision": "amp", "dist": "1n2g", "batch_size": 256,
               "throughput/images_per_sec": 11798.4, "run_id": "abc"}
    assert point_line(3, 12, summary) == "[3/12] resnet50 amp 1n2g bs256: 11,798 images/sec"
    small = {**summary, "arch": "resnet18", "throughput/images_per_sec": 2.44}
    assert point_line(1, 2, small) == "[1/2] resnet18 amp 1n2g bs256: 2.4 images/sec"
    failed = {"arch": "resnet50", "precision": "bf16", "dist": "1n8g", "batch_size": 512, "failure": "oom"}
    assert point_line(12, 12, failed) == "[12/12] resnet50 bf16 1n8g bs512: failed (oom)"
    cpu = {**small, "precision": "fp32", "dist": "1n1g", "batch_size": 8, "accelerator": "cpu"}
    assert point_line(1, 2, cpu) == "[1/2] resnet18 fp32 1n1g bs8 cpu: 2.4 images/sec"


def test_sweep_size_counts_the_basic_sweepers_jobs():
    assert sweep_size(["data.batch_size=128,256", "dist=1n1g,1n2g,1n4g", "precision=amp"]) == 6
    assert sweep_size(["model=resnet18"], params={"data.batch_size": "1,2,4"}) == 3
    assert sweep_size(["data.batch_size=8"], params={"data.batch_size": "1,2,4"}) == 1  # the command line wins
    assert sweep_size(["bench.steps=range(10,50,10)"]) == 4
    # each job as its overrides, in the sweeper's order: what the job's `command` tag holds
    assert sweep_points(["model=resnet18", "optim.lr=1e12,0.5"]) == [["model=resnet18", "optim.lr=1000000000000.0"],
                                                                    ["model=resnet18", "optim.lr=0.5"]]


def test_meter_off_a_terminal_with_a_real_stream_that_is_not_one(tmp_path):
    with open(tmp_path / "log", "w") as stream:
        meter = Meter("job", 2, "images", stream=stream)
        meter.update(1)
        meter.done = 2
        meter.finish()
    assert (tmp_path / "log").read_text().splitlines() == ["job 0/2 images", "job 2/2 images, 0 s"]


def test_fake_imagenet_shows_progress(tmp_path, capsys):
    make(tmp_path / "out", classes=2, train_per_class=2, val_per_class=0, workers=1, progress=True)
    lines = capsys.readouterr().err.splitlines()  # pytest's capture is not a terminal: plain lines
    assert lines[0] == "fake_imagenet 0/4 images" and lines[-1].startswith("fake_imagenet 4/4 images, ")


def test_time_left_is_paced_by_the_steps_after_the_first():
    """The first step autotunes and compiles: a 60 s first step of a 20-step warm-up at 1 s a
    step afterwards leaves ~18 s, not ~18 minutes, and step 1 alone gives no estimate."""
    clock, out = FakeClock(), io.StringIO()
    meter = Meter("rn50: warm-up", 20, stream=out, clock=clock, tty=False, interval_s=0.0)
    clock.t += 60
    meter.update(1)
    clock.t += 1
    meter.update(2)
    assert out.getvalue().splitlines()[1:] == ["rn50: warm-up 1/20 steps, 1 min 00 s",
                                               "rn50: warm-up 2/20 steps, 1 min 01 s, ~18 s left"]


def test_time_left_runs_down_between_steps_to_no_less_than_the_steps_after_this_one():
    clock, out = FakeClock(), io.StringIO()
    meter = Meter("job", 20, stream=out, clock=clock, tty=False, interval_s=0.0)
    for t, done in ((60, 1), (70, 2), (75, 2), (95, 2)):  # 10 s a step; the third takes long
        clock.t = t
        meter.update(done)
    assert [line.rsplit(", ", 1)[-1] for line in out.getvalue().splitlines()[2:]] == [
        "~3 min 00 s left", "~2 min 55 s left", "~2 min 50 s left"]


def lines_once(out: io.StringIO, enough, sep: str = "\n") -> list:
    """out's lines (or a terminal's frames, sep="\r") once enough(them) holds. The deadline only
    bounds a hang: a busy machine may wake the heartbeat late."""
    deadline = time.monotonic() + 120
    while not enough(out.getvalue().split(sep)):
        assert time.monotonic() < deadline, out.getvalue()
        time.sleep(0.05)
    return out.getvalue().split(sep)


def fast_clock(factor: float):
    """The host's clock, factor times faster. The heartbeat waits interval_s of real time (its
    thread's Event.wait), so interval_s=0.05 with factor 20 writes a line each 0.05 s that says one
    more second: the test takes a fraction of a second, not seconds."""
    start = time.monotonic()
    return lambda: start + (time.monotonic() - start) * factor


DURATION = r"(?:\d+ min )?\d+ s"  # rn50/measure/meter.py's duration under an hour


def seconds(duration: str) -> int:
    minutes, _, rest = duration.rpartition(" min ")
    return int(minutes or 0) * 60 + int(rest.removesuffix(" s"))


def test_a_heartbeat_writes_the_line_while_no_step_ends_then_the_time_left_and_stops_with_the_phase():
    out = io.StringIO()
    meter = Meter("job", 5, stream=out, tty=False, interval_s=0.05, clock=fast_clock(20), heartbeat=True)
    lines = lines_once(out, lambda lines: len(lines) >= 4)[:-1]  # the opening line and two beats
    assert lines[0] == "job 0/5 steps"
    # On the fast clock a busy machine's late beat can pass a minute ("1 min 02 s").
    elapsed = [seconds(re.fullmatch(rf"job 0/5 steps, ({DURATION})", line)[1]) for line in lines[1:]]
    assert elapsed == sorted(elapsed) and elapsed[-1] >= 1
    meter.update(1)
    meter.update(2)  # two steps timed: the next line says how long the rest takes
    last = lines_once(out, lambda lines: "left" in lines[-2])[-2]
    assert re.fullmatch(rf"job 2/5 steps, {DURATION}, ~{DURATION} left", last), last
    meter.done = 5
    meter.finish()
    final = out.getvalue()
    assert final.splitlines()[-1].startswith("job 5/5 steps, ")
    meter.heartbeat.join(60)  # the heartbeat ends with the phase (at once; 60 s for a busy machine) ...
    assert not meter.heartbeat.is_alive() and out.getvalue() == final  # ... and wrote nothing after the last line


def test_on_a_terminal_the_heartbeat_moves_the_clock_through_a_step_that_does_not_end():
    out = io.StringIO()
    meter = Meter("job", 5, stream=out, tty=True, heartbeat=True)
    frames = lines_once(out, lambda frames: any(re.search(r"0/5 steps, [1-9]\d* s", f) for f in frames), sep="\r")
    assert frames[1].startswith("job [" + "." * 24 + "] 0/5 steps")
    meter.finish()
    assert out.getvalue().endswith("\n")


def test_a_compiled_run_says_it_compiles_then_what_it_found_cached(monkeypatch, tmp_path):
    from torch._dynamo.utils import counters

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    from rn50.rank import progress as module

    timers = {"_compile.compile_inner": 40.0, "OutputGraph.call_user_compiler": 30.0}  # an earlier run's
    monkeypatch.setattr(module, "compile_times", lambda repr, aggregate: (list(timers), [f"{v:.6f}" for v in
                                                                                          timers.values()]))
    clock, out, log = FakeClock(), io.StringIO(), io.StringIO()
    progress = Progress(2, 2, batch_size=4, world_size=1, stream=out, clock=clock, tty=False, heartbeat=False,
                        compiling=True, timers_to=log)
    trainer = SimpleNamespace(is_global_zero=True)
    counters["inductor"]["fxgraph_cache_miss"] += 5  # an earlier run of this warm rank compiled these
    progress.on_train_start(trainer, None)
    # the heartbeat's lines carry the note while the first step compiles
    assert progress.meter.note == ("compiling (torch.compile: minutes the first time these settings run, fewer "
                                   f"once cached in {tmp_path / 'cache'})")
    clock.t += 290.0
    counters["inductor"]["fxgraph_cache_hit"] += 12
    counters["inductor"]["fxgraph_cache_miss"] += 2
    timers.update({"_compile.compile_inner": 52.5, "OutputGraph.call_user_compiler": 33.0, "async_compile.wait": 7.25})
    progress.on_train_batch_end(trainer, None, None, None, 0)
    clock.t += 1.0
    progress.on_train_batch_end(trainer, None, None, None, 1)
    lines = out.getvalue().splitlines()
    assert lines[1] == (f"rn50: first step, with the compile, in 4 min 50 s: 12 graph(s) loaded from the cache in "
                        f"{tmp_path / 'cache'}, 2 compiled")
    assert not any("compiling" in line for line in lines[2:])  # the note went with the first step
    # torch's timers for this first step alone, the largest first, go to the rank's log, not the console
    assert log.getvalue() == ("rn50: torch.compile's timers in the first step, seconds (nested): "
                              "_compile.compile_inner 12.5, async_compile.wait 7.2, OutputGraph.call_user_compiler 3.0\n")
    assert "timers" not in out.getvalue()
    progress.on_train_end(trainer, None)
    assert log.getvalue().count("timers") == 1  # once a run


def test_a_compile_that_never_finishes_its_first_step_still_logs_its_timers(monkeypatch):
    from rn50.rank import progress as module

    timers = {"_compile.compile_inner": 1.0}
    monkeypatch.setattr(module, "compile_times", lambda repr, aggregate: (list(timers), [str(v) for v in
                                                                                          timers.values()]))
    log = io.StringIO()
    progress = Progress(2, 2, batch_size=4, world_size=1, stream=io.StringIO(), clock=FakeClock(), tty=False,
                        heartbeat=False, compiling=True, timers_to=log)
    progress.on_train_start(SimpleNamespace(is_global_zero=True), None)
    timers["_compile.compile_inner"] = 301.0
    progress.on_exception(SimpleNamespace(is_global_zero=True), None, RuntimeError("stopped while compiling"))
    assert log.getvalue() == "rn50: torch.compile's timers in the first step, seconds (nested): _compile.compile_inner 300.0\n"
    # a torch whose timers read otherwise: the line says so, and the run goes on
    monkeypatch.setattr(module, "compile_times", lambda repr, aggregate: None)
    assert module.compile_seconds() == {}


def test_the_compile_cache_is_the_users_own_and_lasting(monkeypatch, tmp_path):
    from rn50.measure import settings

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert settings.compile_cache_dir() == str(tmp_path / "xdg" / "rn50" / "torchinductor")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert settings.compile_cache_dir() == str(tmp_path / "home" / ".cache" / "rn50" / "torchinductor")
    settings.set_compile_cache()
    assert settings.compile_cache_dir() == str(tmp_path / "home" / ".cache" / "rn50" / "torchinductor")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/scratch/mine")  # the user's wins
    settings.set_compile_cache()
    assert settings.compile_cache_dir() == "/scratch/mine"


@pytest.mark.parametrize("torch_version,cached,retuned,noted", [
    ("2.11.0+cu130", True, 44.8, True), ("2.12.0", True, 44.8, False), ("2.11.0+cu130", False, 44.8, False),
    ("2.11.0+cu130", True, 1.2, False),  # what is left with rn50's warm-start settings (rn50/rank/warm_compile.py)
])
def test_a_warm_start_that_tunes_again_says_torch_does_it(monkeypatch, torch_version, cached, retuned, noted):
    """On torch 2.11 a warm experiment=fastest at 2 GPUs spent 44.8 s of its 62 s first step in coordinate
    descent tuning its cached graphs' kernels again (issue 42); the rank's log says why, and only then."""
    from torch.torch_version import TorchVersion

    from rn50.rank import progress as module

    timers = {"_compile.compile_inner": 1.0, module.RETUNING: 0.0}
    counts = [(0, 0)]  # inductor's FX graph cache (hits, misses) so far
    monkeypatch.setattr(module, "cache_counts", lambda: counts[-1])
    monkeypatch.setattr(module, "compile_times", lambda repr, aggregate: (list(timers), [str(v) for v in
                                                                                          timers.values()]))
    monkeypatch.setattr(module.warm_compile, "torch_version", TorchVersion(torch_version))
    log, trainer = io.StringIO(), SimpleNamespace(is_global_zero=True)
    progress = Progress(2, 2, batch_size=4, world_size=1, stream=io.StringIO(), clock=FakeClock(), tty=False,
                        heartbeat=False, compiling=True, timers_to=log)
    progress.on_train_start(trainer, None)
    counts.append((10, 0) if cached else (0, 10))
    timers.update({"_compile.compile_inner": 5.0, module.RETUNING: retuned})
    progress.on_train_batch_end(trainer, None, None, None, 0)
    assert ("though every graph came from the cache" in log.getvalue()) == noted
    if noted:
        assert log.getvalue().endswith(
            "CachingAutotuner.coordinate_descent_tuning 44.8, _compile.compile_inner 4.0. Coordinate descent tuned "
            "kernels again for 44.8 s though every graph came from the cache: torch 2.11.0+cu130 does not read its "
            "results back on its own (pytorch/pytorch#172819; torch 2.12 and later do). rn50 loads a rank's kernels "
            "in its own process, which keeps them, once a run of the same settings has finished on its GPU "
            "(rn50/rank/warm_compile.py)\n")
