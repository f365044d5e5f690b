"""rn50.data.dali on the CPU path: a tiny ImageFolder tree, a stand-in trainer, no Trainer.fit."""

import itertools
import random
import shutil
import sys
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("nvidia.dali")
from PIL import Image  # noqa: E402

import rn50.data  # noqa: E402
from rn50.data import dali  # noqa: E402
from rn50.data.dali import DaliData, DaliLoader, shard_files  # noqa: E402
from rn50.errors import Rn50Error  # noqa: E402
from rn50.options import pipelines  # noqa: E402
from rn50.options.components import Options  # noqa: E402
from rn50.point.validate import validate  # noqa: E402

# Folders made out of order: labels must follow the sorted names, as with torchvision's ImageFolder.
CLASSES = ["cat", "ant", "bee"]
COLORS = {"ant": (200, 30, 30), "bee": (30, 200, 30), "cat": (30, 30, 200)}  # label 0, 1, 2
PER_CLASS, BATCH, SIZE = 8, 5, 32


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """root/train/<class>/*.JPEG: solid images of each class's color, 64-120 px, varied shapes."""
    root = tmp_path_factory.mktemp("imagenet")
    rng = random.Random(0)
    for name in CLASSES:
        (root / "train" / name).mkdir(parents=True)
        for i in range(PER_CLASS):
            size = (rng.randint(64, 120), rng.randint(64, 120))
            Image.new("RGB", size, COLORS[name]).save(root / "train" / name / f"{name}_{i}.JPEG")
    return root


def data(root, rank=0, world=1, channels_last=True, fp16=False):
    dm = DaliData(str(root), batch_size=BATCH, image_size=SIZE, num_threads=2,
                  channels_last=channels_last, fp16=fp16, seed=7, endless=True)
    dm.trainer = SimpleNamespace(global_rank=rank, world_size=world,
                                 strategy=SimpleNamespace(root_device=torch.device("cpu")))
    return dm


def batches(dm, n):
    return list(itertools.islice(dm.train_dataloader(), n))


# Each data.dali key at a value other than its default (MLPerf-sized paddings and hints); the
# GPU-only ones reach DALI's CPU decoder, which takes and ignores them, or are skipped on a CPU.
LEVERS = {
    "num_threads=1": lambda dm, pipe: dm.num_threads == pipe.num_threads == 1,
    "prefetch_queue_depth=3": lambda dm, pipe: pipe.prefetch_queue_depth == 3,
    "hw_decoder_load=0.5": lambda dm, pipe: dm.options.hw_decoder_load == 0.5,
    "device_memory_padding=211025920": lambda dm, pipe: dm.options.device_memory_padding == 211025920,
    "host_memory_padding=140544512": lambda dm, pipe: dm.options.host_memory_padding == 140544512,
    "preallocate_width_hint=5980": lambda dm, pipe: dm.options.preallocate_width_hint == 5980,
    "preallocate_height_hint=6430": lambda dm, pipe: dm.options.preallocate_height_hint == 6430,
    "output_dtype=float16": lambda dm, pipe: dm.fp16,
    "output_dtype=float32": lambda dm, pipe: not dm.fp16,
    "stream_outputs=true": lambda dm, pipe: dm.options.stream_outputs,
    "cpu_prefetch_queue_depth=3": lambda dm, pipe: pipe.prefetch_queue_depth == {"cpu_size": 3, "gpu_size": 2},
    "stream_policy=single": lambda dm, pipe: pipe.stream_policy.name == "SINGLE",
    "concurrency=full": lambda dm, pipe: pipe.concurrency.name == "FULL",
    "cpu_decode_share=0.5": lambda dm, pipe: dm.options.cpu_decode_share == 0.5,
    "hybrid_huffman_threshold=0": lambda dm, pipe: dm.options.hybrid_huffman_threshold == 0,
    "affine=false": lambda dm, pipe: not dm.options.affine,
    "training_stream=default": lambda dm, pipe: dm.options.training_stream.value == "default",
    # the whole image decoded into the cache, its files skipped once cached, the crop cut after
    "cache_size_mb=64,cpu_decode_share=0": lambda dm, pipe: {"cache_size: 64", "skip_cached_images: True",
                                          "OpSpec for RandomResizedCrop:"} <= set(specs(pipe)),
}


def specs(pipe) -> list:
    """Every line of the DALI operators' specs in a built pipeline: their names and arguments."""
    return [line.strip() for op in pipe._ops for line in str(op.spec).splitlines()]


@pytest.mark.parametrize("lever", LEVERS)
def test_each_dali_key_composes_and_runs_a_step(tree, compose_cfg, lever):
    # bf16: auto gives float32 outputs, and float16 is allowed too.
    cfg = validate(compose_cfg(["data=dali", f"data.root={tree}", "precision=bf16", f"data.image_size={SIZE}",
                                f"data.batch_size={BATCH}", "data.dali.num_threads=2",
                                *(f"data.dali.{key}" for key in lever.split(","))]))
    dm = pipelines.build(cfg)
    pipe = dm._pipeline(torch.device("cpu"), rank=0, world=1)
    images, labels = next(iter(DaliLoader(dm, pipe, rank=0, world=1)))
    assert LEVERS[lever](dm, pipe)
    assert images.shape == (BATCH, 3, SIZE, SIZE) and labels.shape == (BATCH,)
    assert images.dtype == (torch.float16 if lever == "output_dtype=float16" else torch.float32)
    assert images.is_contiguous(memory_format=torch.channels_last)


def test_auto_outputs_follow_the_precision_option_built_with_the_pipeline(tree, compose_cfg):
    """data.dali.output_dtype=auto gives float16 batches under an fp16 autocast: that of the run's
    precision option, handed over by Options.of, not one built again from the config (fp32 here)."""
    cfg = compose_cfg(["data=dali", f"data.root={tree}", "precision=fp32", f"data.image_size={SIZE}",
                       f"data.batch_size={BATCH}", "data.dali.num_threads=2"])
    assert not Options.of(cfg).data.build(cfg, endless=True).fp16
    amp = Options.of(compose_cfg(["precision=amp"])).precision
    dm = Options.of(cfg, precision=amp).data.build(cfg, endless=True)
    images, _ = next(iter(DaliLoader(dm, dm._pipeline(torch.device("cpu"), rank=0, world=1), rank=0, world=1)))
    assert dm.fp16 and images.dtype == torch.float16


@pytest.mark.parametrize("channels_last", [True, False])
@pytest.mark.parametrize("fp16", [False, True])
def test_batches_match_the_model_input(tree, channels_last, fp16):
    # 24 files in batches of 5: 12 batches run through two epoch ends, every batch full.
    for images, labels in batches(data(tree, channels_last=channels_last, fp16=fp16), 12):
        assert images.shape == (BATCH, 3, SIZE, SIZE)
        assert images.dtype == (torch.float16 if fp16 else torch.float32)
        fmt = torch.channels_last if channels_last else torch.contiguous_format
        assert images.is_contiguous(memory_format=fmt)
        assert labels.dtype == torch.int64 and labels.shape == (BATCH,)
        assert 0 <= labels.min() and labels.max() < len(CLASSES)


def test_images_are_normalized_and_labelled_by_sorted_folder(tree):
    mean, std = torch.tensor(dali.MEAN), torch.tensor(dali.STD)
    expected = {label: (torch.tensor(COLORS[name], dtype=torch.float) - mean) / std
                for label, name in enumerate(sorted(CLASSES))}
    images, labels = map(torch.cat, zip(*batches(data(tree), 5)))
    assert images.min() < 0 and images.max() < 5  # normalized, not 0..255
    assert images.mean().abs() < 1
    channel_means = images.float().mean(dim=(2, 3))
    for got, label in zip(channel_means, labels.tolist()):
        torch.testing.assert_close(got, expected[label], atol=0.15, rtol=0)


def test_ranks_read_disjoint_shards_covering_the_files(tree):
    every = {str(p) for p in (tree / "train").glob("*/*.JPEG")}
    # Two ranks of 12 files each; 3 batches of 4 are one epoch of a shard.
    shards = [{f for b in shard_files(str(tree), rank, 2, 7, 4, 3) for f in b} for rank in (0, 1)]
    assert len(shards[0]) == len(shards[1]) == 12
    assert not shards[0] & shards[1]
    assert shards[0] | shards[1] == every


@pytest.mark.parametrize("damage", ["truncated_header", "truncated_data", "random_bytes"])
def test_corrupt_jpeg_error_names_the_file(tree, tmp_path, damage):
    root = tmp_path / "imagenet"
    shutil.copytree(tree, root)
    bad = root / "train" / "bee" / "bee_3.JPEG"
    noisy = Image.effect_noise((100, 100), 64).convert("RGB")  # enough entropy data to cut into
    noisy.save(bad)
    content = bad.read_bytes()
    cut = {"truncated_header": content[:200], "truncated_data": content[:len(content) // 2],
           "random_bytes": random.Random(0).randbytes(3000)}
    bad.write_bytes(cut[damage])
    with pytest.raises(Rn50Error) as err:
        batches(data(root), 12)
    message = str(err.value)
    assert str(bad) in message and "\n" not in message
    assert message.count(str(root)) == 1, message  # that file alone


def test_missing_dali_is_one_line_naming_the_extras(monkeypatch):
    monkeypatch.setitem(sys.modules, "nvidia.dali", None)
    monkeypatch.delitem(sys.modules, "rn50.data.dali")
    monkeypatch.delattr(rn50.data, "dali")  # so that the next import imports it afresh
    with pytest.raises(Rn50Error) as err:
        pipelines.dali()  # what data=dali's build and the bare loop's --dali import DALI through
    message = str(err.value)
    assert "\n" not in message and 'pip install -e ".[dali-cuda130]"' in message
    assert all(extra in message for extra in ("dali-cuda110", "dali-cuda120", "dali-cuda130"))
    assert "pick the one matching your CUDA major version" in message


def test_bare_loop_takes_dali_batches(tree, capsys):
    from rn50.tools import baseline

    common = ["--arch", "resnet18", "--precision", "fp32", "--batch-size", str(BATCH), "--image-size", str(SIZE),
              "--warmup-steps", "1", "--steps", "2", "--data-root", str(tree), "--dali", "num_threads=1"]
    for extra in ([], ["--decode-only"]):
        result = baseline.main([*common, *extra])
        assert result["images_per_sec"] > 0 and result["data_root"] == str(tree)
    with pytest.raises(SystemExit):
        baseline.main([*common, "--dali", "prefetch_queue_depth=0"])
    assert "rn50.baseline: error: data.dali.prefetch_queue_depth=0 is out of range" in capsys.readouterr().err
