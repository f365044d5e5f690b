"""data=dali: NVIDIA DALI reads root/train/<class>/*.JPEG and does all decoding and augmentation.

GPU path (the strategy's device is cuda): the host only reads file bytes; nvJPEG decodes on the
GPU fused with the RandomResizedCrop-style crop (device="mixed"), then resize, random flip and
normalization run there too. Batches come out in the model's dtype and memory format (HWC, seen as
NCHW channels_last) with int64 labels on the device, so nothing copies them again.
CPU path: the same graph with CPU operators in a CPU-only pipeline, for CPU runs and the tests.
DALI is optional: importing this module does not import it; DaliData raises Rn50Error without it.
"""

import os

import pytorch_lightning as pl

from rn50.data import IMAGENET_MEAN, IMAGENET_STD, eval_resize, load_rgb
from rn50.checks import MISSING_DALI
from rn50.errors import Rn50Error

# DALI normalizes 0..255 pixels; torchvision's constants are for 0..1.
MEAN = [255 * m for m in IMAGENET_MEAN]
STD = [255 * s for s in IMAGENET_STD]


def read_files(root: str, shard_id: int, num_shards: int, seed: int):
    """The training pipeline's reader; shard_files runs it alone to see which files it reads."""
    from nvidia.dali import fn

    return fn.readers.file(
        file_root=os.path.join(root, "train"), shard_id=shard_id, num_shards=num_shards,
        name="Reader", seed=seed,
        # DALI first permutes the whole file list with a fixed seed, the same on every rank, so
        # shards are disjoint and mix classes; the buffer then reorders each epoch.
        random_shuffle=True, initial_fill=1024,
        # Each rank rereads its own 1/world of the files, so a node's page cache keeps its shards.
        stick_to_shard=True,
        # No repeated samples; step-bounded training needs no equal batch counts across ranks.
        pad_last_batch=False,
    )


def shard_files(root: str, shard_id: int, num_shards: int, seed: int, batch_size: int,
                batches: int) -> list[list[str]]:
    """Paths of the files in a shard's first `batches` batches: only reads, no decoding."""
    import numpy as np
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=batch_size, num_threads=1, device_id=None)
    def names():
        return fn.get_property(read_files(root, shard_id, num_shards, seed)[0], key="source_info")

    pipe, train = names(), os.path.join(root, "train")
    pipe.build()
    return [[os.path.join(train, np.asarray(name).tobytes().decode()) for name in pipe.run()[0]]
            for _ in range(batches)]


class DaliData(pl.LightningDataModule):
    def __init__(self, root: str, batch_size: int, image_size: int, num_threads: int,
                 channels_last: bool, fp16: bool, seed: int, validate: bool = False):
        super().__init__()
        try:
            import nvidia.dali  # noqa: F401
        except ImportError as exc:
            raise Rn50Error(MISSING_DALI) from exc
        self.root, self.batch_size, self.image_size = root, batch_size, image_size
        self.num_threads, self.channels_last, self.fp16, self.seed = num_threads, channels_last, fp16, seed
        self.validate = validate

    def _pipeline(self, device):
        from nvidia.dali import fn, pipeline_def, types

        gpu, rank = device.type == "cuda", self.trainer.global_rank

        # Augmentations differ per rank; the reader's seed is its own and the same on every rank.
        @pipeline_def(batch_size=self.batch_size, num_threads=self.num_threads,
                      device_id=device.index if gpu else None, seed=self.seed + rank)
        def train():
            jpegs, labels = read_files(self.root, rank, self.trainer.world_size, self.seed)
            images = fn.decoders.image_random_crop(
                jpegs, device="mixed" if gpu else "cpu", output_type=types.RGB,
                random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3], num_attempts=100)
            images = fn.resize(images, size=[self.image_size, self.image_size],
                               interp_type=types.INTERP_LINEAR, antialias=False)
            images = fn.crop_mirror_normalize(
                images, mirror=fn.random.coin_flip(), mean=MEAN, std=STD,
                dtype=types.FLOAT16 if self.fp16 else types.FLOAT,
                output_layout="HWC" if self.channels_last else "CHW")
            # Cast and move inside the pipeline, asynchronously: the step gets (B,) int64 labels
            # on its device, with no copy or host sync of its own.
            labels = fn.reshape(fn.cast(labels.gpu() if gpu else labels, dtype=types.INT64), shape=[])
            return images, labels

        pipe = train()
        pipe.build()  # setup errors (no files, bad device) surface now, not at the first step
        return pipe

    def train_dataloader(self):
        batches = self._batches(self._pipeline(self.trainer.strategy.root_device))
        if not self.validate:
            return batches
        # train=accuracy counts epochs: each is one pass's worth of full global batches, cut
        # from the endless stream (whose shards reshuffle as they go).
        return EpochsOf(batches, self.steps_per_epoch(self.trainer.world_size))

    def steps_per_epoch(self, world: int) -> int:
        """Full global batches in one pass over root/train, as DALI's reader counts the files."""
        from nvidia.dali import pipeline_def

        @pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def files():
            return read_files(self.root, 0, 1, self.seed)[0]

        counter = files()
        counter.build()
        return int(counter.epoch_size("Reader")) // (self.batch_size * world)

    def val_dataloader(self):
        if not self.validate:
            return []
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

        pipe = self._eval_pipeline(self.trainer.strategy.root_device)
        # PARTIAL: the shard's last batch is short, never topped up, so every image counts once.
        it = DALIGenericIterator([pipe], ["images", "labels"], reader_name="Reader",
                                 last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True)
        return EvalBatches(it, self.channels_last)

    def _eval_pipeline(self, device):
        """root/val: resize the shorter side, center crop, normalize; DALI's shards are
        contiguous, disjoint slices of the sorted file list, together the whole set."""
        from nvidia.dali import fn, pipeline_def, types

        gpu, rank = device.type == "cuda", self.trainer.global_rank

        @pipeline_def(batch_size=self.batch_size, num_threads=self.num_threads,
                      device_id=device.index if gpu else None, seed=self.seed)
        def evaluate():
            jpegs, labels = fn.readers.file(file_root=os.path.join(self.root, "val"), shard_id=rank,
                                            num_shards=self.trainer.world_size, name="Reader",
                                            random_shuffle=False, pad_last_batch=False, stick_to_shard=True)
            images = fn.decoders.image(jpegs, device="mixed" if gpu else "cpu", output_type=types.RGB)
            images = fn.resize(images, resize_shorter=eval_resize(self.image_size), interp_type=types.INTERP_LINEAR)
            images = fn.crop_mirror_normalize(
                images, crop=(self.image_size, self.image_size), mean=MEAN, std=STD,
                dtype=types.FLOAT16 if self.fp16 else types.FLOAT,
                output_layout="HWC" if self.channels_last else "CHW")
            labels = fn.reshape(fn.cast(labels.gpu() if gpu else labels, dtype=types.INT64), shape=[])
            return images, labels

        pipe = evaluate()
        pipe.build()
        return pipe

    def _batches(self, pipe):
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

        done = 0
        try:
            # FILL: an epoch's last batch is full, topped up from the next epoch. No auto_reset:
            # each new `for` over the iterator resets it, and doing both warns at every epoch end.
            it = DALIGenericIterator([pipe], ["images", "labels"], reader_name="Reader",
                                     last_batch_policy=LastBatchPolicy.FILL, auto_reset=False)
            while True:  # training is step-bounded; the stream never ends
                for [out] in it:
                    images = out["images"]
                    if self.channels_last:
                        images = images.permute(0, 3, 1, 2)  # NHWC memory seen as NCHW, no copy
                    yield images, out["labels"]
                    done += 1
        except RuntimeError as exc:
            self._name_corrupt_file(exc, done)
            raise

    def _name_corrupt_file(self, exc: RuntimeError, batch: int) -> None:
        """DALI 2.4 names the file when decoding fails but not when the header does not parse
        ("nvImageCodec failure: '#3'"); its error comes with the failing batch, so run the reader
        alone up to that batch and name the files of it that Pillow cannot decode either."""
        if "decoders.image_random_crop" not in str(exc):
            return
        files = shard_files(self.root, self.trainer.global_rank, self.trainer.world_size,
                            self.seed, self.batch_size, batch + 1)[batch]
        bad = [path for path in files if not _decodes(path)]
        named = ", ".join(sorted(set(bad))) if bad else "one of " + ", ".join(files)
        reason = str(exc).split("encountered:")[-1].strip().splitlines()[0]
        raise Rn50Error(f"DALI cannot decode {named} ({reason})") from exc


class EpochsOf:
    """`steps` batches of an endless stream per iteration: an epoch Lightning can count."""

    def __init__(self, stream, steps: int):
        self.stream, self.steps = stream, steps

    def __len__(self):
        return self.steps

    def __iter__(self):
        for _ in range(self.steps):
            yield next(self.stream)


class EvalBatches:
    """One pass over the validation shard per iteration, as (images, labels) in the model's layout."""

    def __init__(self, it, channels_last: bool):
        self.it, self.channels_last = it, channels_last

    def __iter__(self):
        for [out] in self.it:
            images = out["images"]
            yield (images.permute(0, 3, 1, 2) if self.channels_last else images), out["labels"]


def _decodes(path: str) -> bool:
    try:
        load_rgb(path)
        return True
    except Exception:
        return False
