"""data=dali's keys (data.dali in rn50/config/schema.py): the DALI pipeline's levers and their choices,
typed as the rest of the schema."""

from dataclasses import dataclass
from enum import Enum
from typing import Optional


class DaliDtype(Enum):
    auto = "auto"
    float16 = "float16"
    float32 = "float32"


class DaliStreamPolicy(Enum):
    default = "default"
    single = "single"
    per_backend = "per_backend"
    per_operator = "per_operator"


class DaliTrainingStream(Enum):
    own = "own"
    default = "default"


class DaliConcurrency(Enum):
    default = "default"
    none = "none"
    backend = "backend"
    full = "full"


@dataclass
class DaliConfig:
    """data=dali's pipeline levers (issue 14); data=synthetic and data=imagefolder ignore them.
    The defaults here are DALI 2.4's own, which rn50 ran before these keys existed, and
    training_stream's, measured (benchmarks/notes/2026-11-24-dali-levers.md). data=dali's YAML sets the measured choice of
    num_threads, hw_decoder_load and cpu_decode_share for rn50's defaults; experiment=fastest sets
    its own."""

    num_threads: Optional[int] = None
    """DALI's CPU threads per rank (file reading, the host side of decoding, the CPU share); null
    uses data.num_workers."""
    prefetch_queue_depth: int = 2
    """Batches the pipeline prepares ahead of the one training takes (DALI's default, 2)."""
    hw_decoder_load: float = 0.65
    """Share of the JPEGs (0 to 1) sent to the GPU's hardware JPEG decoder (A100, H100, H200), the
    rest decoded by nvJPEG on the host and CUDA cores; DALI's default 0.65. GPU runs only. The
    hardware decoder synchronizes the whole GPU once per batch (cudaDeviceSynchronize), so each
    batch's decoding waits for the training work already queued."""
    device_memory_padding: int = 16 * 1024 * 1024
    """Bytes of GPU memory nvJPEG preallocates per thread, so a larger image needs no new
    allocation; DALI's default 16 MiB. GPU runs only."""
    host_memory_padding: int = 8 * 1024 * 1024
    """Bytes of pinned host memory nvJPEG preallocates (two buffers per thread); DALI's default
    8 MiB. GPU runs only."""
    preallocate_width_hint: int = 0
    """Image width in pixels the hardware decoder preallocates for; 0 (DALI's default): none."""
    preallocate_height_hint: int = 0
    """Image height in pixels the hardware decoder preallocates for; 0 (DALI's default): none."""
    output_dtype: DaliDtype = DaliDtype.auto
    """What the pipeline normalizes into, the model's input dtype: auto is float16 under amp and
    amp_static, float32 otherwise; float16 also suits bf16 (autocast casts it on the GPU) but not
    fp32 or tf32. The layout always follows model.channels_last (HWC seen as NCHW channels_last)."""
    stream_outputs: bool = False
    """GPU runs: bind each batch to torch's current CUDA stream (DALI's share_outputs(cuda_stream=...)),
    so the training stream waits for the batch on the device instead of the host waiting for it
    before queuing the step. false: DALI's iterator waits on the host, as before."""
    cpu_decode_share: float = 0.0
    """GPU runs: share of the JPEGs (0 to 1) decoded on the CPU by DALI's threads (libjpeg-turbo),
    the rest by the mixed decoder; only the decoded crops go to the GPU. 0: all on the GPU."""
    cache_size_mb: int = 0
    """GPU runs: MB of GPU memory per rank for DALI's decoded-image cache (MLPerf v4.0's ResNet-50 on
    H100 and H200 used 12,000). An image decoded once stays there and the reader skips its file from
    then on (skip_cached_images, with the shard each rank keeps), so a later epoch decodes only what
    did not fit. Cached images are whole: the random crop is cut from each anew (fn.random_resized_crop),
    where 0 decodes only the crop (fn.decoders.image_random_crop). It pays only where a rank reads its
    files again: train=accuracy's epochs, or a throughput run longer than its shard. 0: no cache. Not
    with cpu_decode_share, whose images the cache would never see."""
    hybrid_huffman_threshold: int = 1_000_000
    """GPU runs: images of more pixels than this use nvJPEG's hybrid Huffman decoder, smaller ones
    Huffman-decode on the host; DALI's default 1,000,000."""
    affine: bool = True
    """GPU runs: keep DALI's threads on the CPUs that NVML names near the GPU (DALI's default; one
    core each only where DALI_AFFINITY_MASK lists them); false lets the OS place them anywhere."""
    training_stream: DaliTrainingStream = DaliTrainingStream.own
    """GPU runs: own trains on a CUDA stream of the rank's own; default on torch's default stream,
    CUDA's legacy stream with its implicit synchronization (as before this key; other pipelines
    train there). At rn50's defaults with DALI the own stream ran closer to synthetic
    (benchmarks/notes/2026-11-24-dali-levers.md, issue 14)."""
    cpu_prefetch_queue_depth: Optional[int] = None
    """Set: DALI's separated-queue executor (exec_dynamic=False), which buffers this many batches of
    the CPU stage (file reads) apart from prefetch_queue_depth batches of the GPU stages. null:
    DALI's default dynamic executor with one queue."""
    stream_policy: DaliStreamPolicy = DaliStreamPolicy.default
    """The dynamic executor's CUDA streams: single (one for every operator), per_backend (one for the
    mixed and one for the GPU operators), per_operator (one per independent branch); default is
    DALI's (per_backend in 2.4)."""
    concurrency: DaliConcurrency = DaliConcurrency.default
    """Which of the dynamic executor's independent operators run at once: none, backend (operators
    of different backends), full (all but CPU operators among themselves); default is DALI's
    (backend in 2.4)."""
