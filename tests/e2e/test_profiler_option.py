"""A profiler that rn50 has never seen, one YAML file, one class and its own typed key, runs through
python -m rn50 and is recorded."""

import textwrap

import pytest
from mlflow.tracking import MlflowClient

from helpers import TINY
from helpers.cli import rn50
from helpers.store import runs_in


# Counts the steps after the measured windows; its metrics() and artifacts() are what rank 0 gathers.
MODULE = '''
from rn50.options.profilers import Profiler


class Counter(Profiler):
    name = "counter"

    def steps(self, cfg):
        return cfg.profiler.after_windows

    def callbacks(self, cfg, first_step, device_type, out):
        import pytorch_lightning as pl

        class Count(pl.Callback):
            seen = 0

            def on_train_batch_end(self, trainer, *args):
                self.seen += trainer.global_step > first_step

            def metrics(self):
                return {"counter/steps_after_windows": self.seen}

            def artifacts(self):
                (out / "counter.txt").write_text(str(self.seen))
                return [str(out / "counter.txt")]

        return [Count()]
'''


# Its own key, typed by its own schema: Hydra imports hydra_plugins/* before it composes.
SCHEMA = '''
from dataclasses import dataclass

from hydra.core.config_store import ConfigStore

from rn50.config.schema import ProfilerConfig


@dataclass
class CounterConfig(ProfilerConfig):
    after_windows: int = 3
    """Steps counted after the measured windows."""


ConfigStore.instance().store(group="schema/profiler", name="counter", node=CounterConfig)
'''


YAML = """\
defaults:
  - /schema/profiler/counter@_here_
_target_: my_profiler.Counter
name: counter
"""


@pytest.mark.slow
def test_a_profiler_from_a_yaml_file_and_a_class_runs_and_is_recorded(tmp_path):
    (tmp_path / "my_profiler.py").write_text(textwrap.dedent(MODULE))
    (tmp_path / "hydra_plugins").mkdir()
    (tmp_path / "hydra_plugins" / "my_counter_schema.py").write_text(textwrap.dedent(SCHEMA))
    (tmp_path / "conf" / "profiler").mkdir(parents=True)
    (tmp_path / "conf" / "profiler" / "counter.yaml").write_text(YAML)
    overrides = [f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "profiler=counter", "precision=fp32"]
    env = {"PYTHONPATH": str(tmp_path)}
    proc = rn50(tmp_path, *TINY, *overrides, "profiler.after_windows=abc", env=env)
    assert proc.returncode == 2 and "profiler.after_windows" in proc.stderr.splitlines()[-1]  # typed
    proc = rn50(tmp_path, *TINY, *overrides, "profiler.after_windows=4", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = runs_in(tmp_path)
    assert run.info.status == "FINISHED" and run.data.tags["profiled"] == "counter"
    assert run.data.params["profiler._target_"] == "my_profiler.Counter"
    assert run.data.params["profiler.after_windows"] == "4"
    assert run.data.metrics["counter/steps_after_windows"] == 4  # the rank read its own key
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    assert "counter.txt" in {a.path.rpartition("/")[2] for a in client.list_artifacts(run.info.run_id)}
