"""A typo gets the closest valid key or option (tests/test_cli.py checks the same lines from the CLI)."""

import pytest
from hydra.errors import HydraException

from rn50.errors import ConfigError
from rn50.config.messages import one_line
from rn50.config.keys import closest, closest_key
from rn50.point.validate import check_declared

TYPOS = {
    # override: the one line it must answer
    "data.batch_sze=8": "data.batch_sze: no such key; did you mean data.batch_size?",
    "bench.step=3": "bench.steps: ",  # the suggestion, checked below
    "precison=bf16": "did you mean precision?",
    "batch_size=8": "did you mean data.batch_size?",
    "data.warmup_steps=3": "did you mean bench.warmup_steps?",
    "dat.batch_size=8": "dat.batch_size: no such key; did you mean data.batch_size?",
    "precision=amp16": "precision=amp16 is not an option; did you mean amp? precision is one of: "
                       "amp, amp_static, bf16, fp32, tf32",
    "model=resnet5": "did you mean resnet50?",
    "model.arch=resnet5": "model.arch=resnet5 is not an option; did you mean resnet50? model.arch is one of:",
    "dist.accelerator=gpuu": "did you mean gpu?",
    "hydra.job.chdri=true": "hydra.job.chdri: no such key; did you mean hydra.job.chdir?",
}


def line_for(compose_cfg, override, option=()):
    with pytest.raises(HydraException) as info:
        compose_cfg([*option, override])
    line = one_line(info.value)
    assert "\n" not in line
    return line


@pytest.mark.parametrize("override", sorted(TYPOS))
def test_a_typo_gets_the_closest_key_or_option(compose_cfg, override):
    line = line_for(compose_cfg, override)
    expected = "did you mean bench.steps?" if override == "bench.step=3" else TYPOS[override]
    assert expected in line, line


def test_no_suggestion_where_none_is_close_or_the_keys_are_the_users(compose_cfg):
    assert line_for(compose_cfg, "foo=1") == "foo: no such key; `python -m rn50 --cfg job` prints every key"
    assert line_for(compose_cfg, "data.colour=1").startswith("data.colour: no such key; data has: name, batch_size")
    # Several options equally close: no guess, the list says it all.
    assert line_for(compose_cfg, "dist=1n3g") == "dist=1n3g is not an option; dist is one of: " \
                                                 "1n1g, 1n2g, 1n4g, 1n8g, 2n8g, 4n8g"
    # cluster.sbatch holds sbatch's own options: say how to add one, never guess a name.
    assert line_for(compose_cfg, "cluster.sbatch.constraint=h100", ["cluster=slurm"]) == \
        "cluster.sbatch.constraint: not in cluster.sbatch yet; add it with +cluster.sbatch.constraint=h100"


def test_a_key_added_with_plus_is_refused_with_a_suggestion(compose_cfg):
    # Hydra's `+` adds a key even to a typed section; check_declared catches it before any process starts.
    cfg = compose_cfg(["cluster=slurm", "+data.batch_sze=8", "+cluster.sbatch.constraint=h100"])
    with pytest.raises(ConfigError, match=r"^data\.batch_sze: no such key; did you mean data\.batch_size\?$"):
        check_declared(cfg)
    check_declared(compose_cfg(["cluster=slurm", "+cluster.sbatch.constraint=h100", "+mfu.peaks.X.fp16=1"]))
    with pytest.raises(ConfigError, match=r"^cluster\.sbatch is a key of cluster=slurm only; add cluster=slurm$"):
        check_declared(compose_cfg(["+cluster.sbatch.constraint=h100"]))  # cluster=local has no sbatch


def test_closest_refuses_ties_and_far_words():
    assert closest("amp16", ["amp", "bf16", "fp32"]) == "amp"
    assert closest("xyz", ["amp", "bf16"]) is None
    assert closest("1n3g", ["1n1g", "1n2g"]) is None
    # optim is right, but learning_rate is far from every name in optim (lr included) and from every
    # key's last part: no guess, rather than a wrong one such as optim.lars_trust.
    assert closest_key("optim.learning_rate") is None
    assert closest_key("telemetry.interval") == "telemetry.interval_s"
