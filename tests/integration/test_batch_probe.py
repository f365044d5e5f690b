"""data.batch_size=auto with the real probe: steps of a composed CPU run in this process."""

import re

import pytest

from rn50.options.components import Options
from rn50.rank import batch_search
from rn50.launcher.launch import preflight


@pytest.mark.slow
def test_real_probe_on_the_cpu_picks_a_batch_and_frees_the_search(compose_cfg, capsys):
    from rn50.point.validate import validate

    cfg = preflight(compose_cfg(["dist.accelerator=cpu", "model=resnet18", "data.image_size=32",
                                 "precision=fp32", "data.batch_size=auto"])).cfg  # as the launcher hands it on
    # Two probes of one warm-up and one timed step: batch 2, then 4 (the cap); (2 + 4) / 2 snaps to 4,
    # already probed. (A window needs a warm-up step before it: WindowTimer refuses none.)
    limits = batch_search.Limits(start=2, max_batch=4, multiple=2, warmup_steps=1, steps=1, step_budget=8)
    result = batch_search.search_batch(cfg, "cpu", Options.of(cfg), limits)
    assert [p.batch for p in result.probes] == [2, 4]
    assert result.batch in (2, 4) and result.steps == 4
    assert cfg.data.batch_size == "auto"  # the rank hands the batch on in a config of its own (reads.decided)
    assert all(p.images_per_sec > 0 for p in result.probes)
    lines = capsys.readouterr().err.splitlines()  # pytest's capture is not a terminal: plain lines
    assert lines[0] == "rn50: batch search 0/8 steps" and re.fullmatch(
        rf"rn50: batch search 4/4 steps, \d+ s, batch {result.batch}", lines[-1]), lines
    # A fixed batch is left alone.
    fixed = validate(compose_cfg(["dist.accelerator=cpu", "data.batch_size=4"]))
    assert batch_search.search_batch(fixed, "cpu", Options.of(fixed)) is None and fixed.data.batch_size == 4
