"""data=dali: NVIDIA DALI reads root/train/<class>/*.JPEG and does all decoding and augmentation.

GPU path (the strategy's device is cuda): the host only reads file bytes; nvJPEG decodes on the
GPU fused with the RandomResizedCrop-style crop (device="mixed"), then resize, random flip and
normalization run there too. Batches come out in the model's dtype and memory format (HWC, seen as
NCHW channels_last) with int64 labels on the device, so nothing copies them again.
CPU path: the same graph with CPU operators in a CPU-only pipeline, for CPU runs and the tests.
DALI is optional: this module imports it, and rn50/options/pipelines.py's dali(), which imports
this module for data=dali and for the bare loop, raises Rn50Error (one line naming the extras)
without it.
"""

import functools
import os
from typing import Optional

import numpy as np
import pytorch_lightning as pl
import torch
from nvidia.dali import fn, pipeline_def, types
from nvidia.dali.backend import ReleaseUnusedMemory
from nvidia.dali.pipeline import OperatorConcurrency, StreamPolicy
from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

from rn50.config.dali_schema import DaliConfig
from rn50.data.modules import IMAGENET_MEAN, IMAGENET_STD, eval_resize, load_rgb
from rn50.errors import Rn50Error

# DALI normalizes 0..255 pixels; torchvision's constants are for 0..1.
MEAN = [255 * m for m in IMAGENET_MEAN]
STD = [255 * s for s in IMAGENET_STD]


def read_files(root: str, shard_id: int, num_shards: int, seed: int, skip_cached: bool = False):
    """The training pipeline's reader; shard_files runs it alone to see which files it reads.
    skip_cached: a file whose image the decoder's cache holds is not read again (an empty sample)."""
    return fn.readers.file(
        file_root=os.path.join(root, "train"), shard_id=shard_id, num_shards=num_shards,
        name="Reader", seed=seed,
        # DALI first permutes the whole file list with a fixed seed, the same on every rank, so
        # shards are disjoint and mix classes; the buffer then reorders each epoch.
        random_shuffle=True, initial_fill=1024,
        # Each rank rereads its own 1/world of the files, so a node's page cache keeps its shards.
        stick_to_shard=True,
        # No repeated samples; step-bounded training needs no equal batch counts across ranks.
        pad_last_batch=False, skip_cached_images=skip_cached,
    )


def shard_files(root: str, shard_id: int, num_shards: int, seed: int, batch_size: int,
                batches: int) -> list[list[str]]:
    """Paths of the files in a shard's first `batches` batches: only reads, no decoding."""
    @pipeline_def(batch_size=batch_size, num_threads=1, device_id=None)
    def names():
        return fn.get_property(read_files(root, shard_id, num_shards, seed)[0], key="source_info")

    pipe, train = names(), os.path.join(root, "train")
    pipe.build()
    return [[os.path.join(train, np.asarray(name).tobytes().decode()) for name in pipe.run()[0]]
            for _ in range(batches)]


class DaliData(pl.LightningDataModule):
    """The training loader of data=dali. endless (rn50's throughput runs, through data.build): one
    stream of batches across the reader's epochs, so Lightning never ends an epoch. Otherwise each
    pass over the loader is one epoch of this rank's shard, for training with real epochs. Either
    way the pipeline is built once and its prefetched batches carry over every epoch end: the
    reader never stops."""

    def __init__(self, root: str, batch_size: int, image_size: int, num_threads: int,
                 channels_last: bool, fp16: bool, seed: int, options: Optional[DaliConfig] = None,
                 endless: bool = False, validate: bool = False):
        super().__init__()
        self.root, self.batch_size, self.image_size = root, batch_size, image_size
        self.num_threads, self.channels_last, self.fp16, self.seed = num_threads, channels_last, fp16, seed
        # validate (train=accuracy): epochs are cut from the endless stream (EpochsOf).
        self.options, self.endless, self.validate = options or DaliConfig(), endless or validate, validate

    def _pipeline(self, device, rank: int, world: int):
        gpu, o = device.type == "cuda", self.options

        # The nvJPEG, hardware-decoder and cache arguments apply to the mixed (GPU) decoder; DALI's
        # CPU decoder accepts and ignores them, so CPU runs and the tests take the same calls.
        nvjpeg = dict(hw_decoder_load=o.hw_decoder_load, device_memory_padding=o.device_memory_padding,
                      host_memory_padding=o.host_memory_padding, preallocate_width_hint=o.preallocate_width_hint,
                      preallocate_height_hint=o.preallocate_height_hint, affine=o.affine,
                      hybrid_huffman_threshold=o.hybrid_huffman_threshold)
        crop = dict(random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3], num_attempts=100)

        def decode(jpegs, on: str):
            """The training crop, cut while decoding; with the cache, cut from the whole image the cache keeps
            (threshold 0: every image, until it is full) and resized with it."""
            if o.cache_size_mb:
                whole = fn.decoders.image(jpegs, device=on, output_type=types.RGB, cache_size=o.cache_size_mb,
                                          cache_type="threshold", cache_threshold=0, **nvjpeg)
                return fn.random_resized_crop(whole, size=[self.image_size] * 2, interp_type=types.INTERP_LINEAR,
                                              antialias=False, **crop)
            return fn.decoders.image_random_crop(jpegs, device=on, output_type=types.RGB, **crop, **nvjpeg)

        # Augmentations differ per rank; the reader's seed is its own and the same on every rank.
        @pipeline_def(batch_size=self.batch_size, num_threads=self.num_threads,
                      device_id=device.index if gpu else None, seed=self.seed + rank,
                      enable_conditionals=o.cpu_decode_share > 0, **executor(o))
        def train():
            jpegs, labels = read_files(self.root, rank, world, self.seed, skip_cached=o.cache_size_mb > 0)
            if o.cpu_decode_share > 0:
                # A DALI conditional: each image goes one way, and the batch is merged on the GPU.
                # The CPU share costs the GPU no per-image decoding work, which under training
                # waits behind the model's kernels (benchmarks/notes/2026-11-24-dali-levers.md, issue 14).
                if fn.random.coin_flip(probability=o.cpu_decode_share, dtype=types.BOOL):
                    images = decode(jpegs, "cpu")
                    images = images.gpu() if gpu else images
                else:
                    images = decode(jpegs, "mixed" if gpu else "cpu")
            else:
                images = decode(jpegs, "mixed" if gpu else "cpu")
            if not o.cache_size_mb:  # on the GPU, once the CPU share has joined it
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
        if gpu and o.stream_outputs:
            # DALIGenericIterator calls share_outputs() with no stream, which blocks the host until
            # the batch is ready; bound to torch's stream, the training stream waits on the device.
            pipe.share_outputs = functools.partial(pipe.share_outputs,
                                                   cuda_stream=torch.cuda.current_stream(device))
        return pipe

    def train_dataloader(self):
        t = self.trainer
        loader = self.loader(t.strategy.root_device, t.global_rank, t.world_size)
        if self.validate:
            # train=accuracy counts epochs: each is one pass's worth of full global batches, cut
            # from the endless stream (whose shards reshuffle as they go).
            return EpochsOf(iter(loader), self.steps_per_epoch(t.world_size))
        # A generator has no len(): Lightning runs it as one epoch that never ends.
        return iter(loader) if self.endless else loader

    def steps_per_epoch(self, world: int) -> int:
        """Full global batches in one pass over root/train, as DALI's reader counts the files."""
        @pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def files():
            return read_files(self.root, 0, 1, self.seed)[0]

        counter = files()
        counter.build()
        return int(counter.epoch_size("Reader")) // (self.batch_size * world)

    def val_dataloader(self):
        if not self.validate:
            return []
        pipe = self._eval_pipeline(self.trainer.strategy.root_device)
        # PARTIAL: the shard's last batch is short, never topped up, so every image counts once.
        it = DALIGenericIterator([pipe], ["images", "labels"], reader_name="Reader",
                                 last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True)
        return EvalBatches(it, self.channels_last)

    def _eval_pipeline(self, device):
        """root/val: resize the shorter side, center crop, normalize; DALI's shards are
        contiguous, disjoint slices of the sorted file list, together the whole set."""
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

    def loader(self, device, rank: int = 0, world: int = 1) -> "DaliLoader":
        """Batches for `rank` of `world` on `device`, usable without a Trainer (rn50.baseline)."""
        return DaliLoader(self, self._pipeline(device, rank, world), rank, world)

    def _name_corrupt_file(self, exc: RuntimeError, batch: int, rank: int, world: int) -> None:
        """DALI 2.4 names the file when decoding fails but not when the header does not parse
        ("nvImageCodec failure: '#3'"); its error comes with the failing batch, so run the reader
        alone up to that batch and name the files of it that Pillow cannot decode either."""
        if "decoders.image_random_crop" not in str(exc):
            return
        files = shard_files(self.root, rank, world, self.seed, self.batch_size, batch + 1)[batch]
        bad = [path for path in files if not _decodes(path)]
        named = ", ".join(sorted(set(bad))) if bad else "one of " + ", ".join(files)
        reason = str(exc).split("encountered:")[-1].strip().splitlines()[0]
        raise Rn50Error(f"DALI cannot decode {named} ({reason})") from exc


def executor(o: DaliConfig) -> dict:
    """Pipeline arguments of data.dali's executor keys; DALI's own default where a key is default."""
    if o.cpu_prefetch_queue_depth is not None:
        return dict(exec_dynamic=False, prefetch_queue_depth={"cpu_size": o.cpu_prefetch_queue_depth,
                                                              "gpu_size": o.prefetch_queue_depth})
    kwargs = dict(prefetch_queue_depth=o.prefetch_queue_depth)
    if o.stream_policy.value != "default":
        kwargs["stream_policy"] = StreamPolicy[o.stream_policy.name.upper()]
    if o.concurrency.value != "default":
        kwargs["concurrency"] = OperatorConcurrency[o.concurrency.name.upper()]
    return kwargs


def model_input(out: dict, channels_last: bool) -> tuple:
    """(images, labels) of one DALI output as the model takes them."""
    images = out["images"]
    if channels_last:
        images = images.permute(0, 3, 1, 2)  # NHWC memory seen as NCHW, no copy
    return images, out["labels"]


class DaliLoader:
    """One pipeline's batches as the model takes them: each pass over it is one epoch of the
    shard, or never ends with DaliData.endless."""

    def __init__(self, data: DaliData, pipe, rank: int, world: int):
        self.data, self.rank, self.world = data, rank, world
        self.done = 0  # batches handed out over all passes: the reader's batch index
        # FILL: an epoch's last batch is full, topped up from the next epoch, as the reader runs on
        # without a break. No auto_reset: each new `for` over the iterator resets it, and doing both
        # warns at every epoch end. A reset only moves the iterator's counters; the pipeline keeps
        # its prefetched batches, so an epoch end costs no wait. The first batch is not decoded
        # here but at the first step, where an error in it names the corrupt file.
        self.iterator = DALIGenericIterator([pipe], ["images", "labels"], reader_name="Reader",
                                            last_batch_policy=LastBatchPolicy.FILL, auto_reset=False,
                                            prepare_first_batch=False)

    def __len__(self) -> int:
        """Batches in the current epoch of this rank's shard."""
        return len(self.iterator)

    def __iter__(self):
        try:
            while True:
                for [out] in self.iterator:
                    yield model_input(out, self.data.channels_last)
                    self.done += 1
                if not self.data.endless:
                    return
        except RuntimeError as exc:
            self.data._name_corrupt_file(exc, self.done, self.rank, self.world)
            raise


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
            yield model_input(out, self.channels_last)


def _decodes(path: str) -> bool:
    try:
        load_rgb(path)
        return True
    except Exception:
        return False


def own_stream():
    """data.dali.training_stream=own: torch's stream context on the rank's own stream of the current device."""
    return torch.cuda.stream(_own_stream(torch.cuda.current_device()))


@functools.lru_cache(maxsize=None)
def _own_stream(device_index: int):
    """One per device and process: a warm rank reuses it run after run (each new stream would
    bring its own cuBLAS workspace). Normal priority: the highest measured the same."""
    return torch.cuda.Stream(device_index)


def release_memory() -> None:
    """DALI's own device and pinned-memory pools, given back between a warm rank's runs."""
    ReleaseUnusedMemory()
