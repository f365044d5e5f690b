"""Profilers as components: each conf/profiler/*.yaml names its class with `_target_`, and Hydra's
instantiate builds it from the option's keys (cfg.profiler, typed by the option's own schema:
pytorch's wait/warmup/active, ncu's steps/executable/metrics). A class answers:

- check(cfg): compose-time checks of its keys (ConfigError, one line naming the key);
- preflight(cfg): checks of this host before any rank starts (ncu: installed, one GPU process);
- steps(cfg): the steps it profiles after the measured windows, so no window is ever profiled;
- callbacks(cfg, first_step, device_type, out) and lightning_profiler(out): what each rank adds
  to its Trainer; callbacks expose metrics() and artifacts(), which rank 0 gathers;
- launcher(cfg, config_yaml, out): None, or the call that runs the ranks under the profiler's own
  process (ncu starts the one rank itself).

The launcher builds these objects too, so this module imports neither torch nor Lightning: the
callbacks a rank adds come from rn50/profiling/, reached by `in_rank()`; ncu's launcher side
(rn50/profiling/ncu.py) imports neither. Adding a profiler is one YAML file and one class, as for data pipelines.
"""

from pathlib import Path
from typing import Callable, List, Optional

from omegaconf import DictConfig

from rn50.config.reads import positive
from rn50.options import components
from rn50.profiling import ncu


def in_rank():
    """The rank half of the profilers (rn50/profiling/): torch.profiler's, Lightning's and ncu's range."""
    from rn50.profiling import ncu_range, torch_profile  # deferred: only a rank imports torch

    return ncu_range, torch_profile


def of(cfg: DictConfig) -> "Profiler":
    """The run's profiler object, built from cfg.profiler's `_target_`. A run builds it once, with the
    other options (components.Options), and hands it on; this is for a caller that has none."""
    return components.of(cfg, "profiler")


def profiled_steps(cfg: DictConfig) -> int:
    """Steps a profiler adds after the measured windows, so the throughput window is never profiled."""
    return of(cfg).steps(cfg)


class Profiler(components.Component):
    """What every profiler answers; the base profiles nothing."""

    starts_ranks = False
    """True where launcher() starts the rank processes itself: a sweep keeps no warm ones for it."""

    def preflight(self, cfg: DictConfig) -> None:
        """Checks of this host before any rank starts; none by default. The run's other options, which
        the launcher built with this one, are self.run (its cluster: self.run.cluster)."""

    def steps(self, cfg: DictConfig) -> int:
        """Steps profiled after the measured windows."""
        return 0

    def callbacks(self, cfg: DictConfig, first_step: int, device_type: str, out: Path) -> List:
        return []

    def lightning_profiler(self, out: Path):
        return None

    def launcher(self, cfg: DictConfig, config_yaml: str, out: Path) -> Optional[Callable[[], list]]:
        return None


class NoProfiler(Profiler):
    name = "none"


class Simple(Profiler):
    """Lightning's SimpleProfiler: time per hook over the whole run, written to profiler*.txt."""

    name = "simple"

    def lightning_profiler(self, out: Path):
        return in_rank()[1].simple(out)


class PyTorch(Profiler):
    """torch.profiler over wait+warmup+active steps (rn50/profiling/torch_profile.py)."""

    name = "pytorch"

    def check(self, cfg: DictConfig) -> None:
        positive(cfg, "profiler.wait", "use 0 or more steps", 0)
        positive(cfg, "profiler.warmup", "use 0 or more steps", 0)
        positive(cfg, "profiler.active", "use 1 or more recorded steps")

    def steps(self, cfg: DictConfig) -> int:
        p = self.keys
        return p.wait + p.warmup + p.active

    def callbacks(self, cfg: DictConfig, first_step: int, device_type: str, out: Path) -> List:
        return [in_rank()[1].TorchProfile(self.keys, first_step, device_type, out)]


class Ncu(Profiler):
    """Nsight Compute over `steps` steps, its one rank started under ncu (rn50/profiling/ncu.py)."""

    name, starts_ranks = "ncu", True

    def check(self, cfg: DictConfig) -> None:
        positive(cfg, "profiler.steps", "use 1 or more profiled steps")

    def preflight(self, cfg: DictConfig) -> None:
        ncu.preflight(cfg, started_elsewhere=self.run.cluster.rank_env is not None)

    def steps(self, cfg: DictConfig) -> int:
        return self.keys.steps

    def callbacks(self, cfg: DictConfig, first_step: int, device_type: str, out: Path) -> List:
        return [in_rank()[0].NcuRange(first_step, self.keys.steps)]

    def launcher(self, cfg: DictConfig, config_yaml: str, out: Path) -> Optional[Callable[[], list]]:
        return lambda: ncu.run(cfg, config_yaml, out)
