"""Typed schema of an rn50 run, registered in Hydra's ConfigStore.

conf/config.yaml puts `rn50_schema` first in its defaults list, so every group
option and override is merged into these dataclasses and type-checked at
compose time. OmegaConf 2.3 has no Literal, so closed choices are Enums: a bad
value fails with the dotted key and the allowed names. Range checks that types
cannot express live in `validate`.
"""

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, Optional

from hydra.core.config_store import ConfigStore

from rn50.config.dali_schema import DaliConfig

# Every ResNet downsamples by 32; below that BatchNorm sees a single value per channel.
MIN_IMAGE_SIZE = 32


class Arch(Enum):
    resnet18 = "resnet18"
    resnet34 = "resnet34"
    resnet50 = "resnet50"
    resnet101 = "resnet101"
    resnet152 = "resnet152"


class Accelerator(Enum):
    auto = "auto"
    gpu = "gpu"
    cpu = "cpu"


class Device(Enum):
    auto = "auto"
    gpu = "gpu"
    cpu = "cpu"


class TrainName(Enum):
    throughput = "throughput"
    accuracy = "accuracy"


class OptimName(Enum):
    sgd = "sgd"
    lars = "lars"


# torch.compile's own mode names, hyphens included, so `model.compile_mode=reduce-overhead`
# reads as in torch's documentation (the functional API allows names class syntax does not).
CompileMode = Enum(
    "CompileMode",
    [(m, m) for m in ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")],
    module=__name__,
    qualname="CompileMode",
)


class CompileDDP(Enum):
    """How torch.compile meets DDP: torch._dynamo.config.optimize_ddp's own names (its third,
    python_reducer, needs compiled autograd, which rn50 does not run)."""

    ddp_optimizer = "ddp_optimizer"
    no_optimization = "no_optimization"


@dataclass
class ModelConfig:
    arch: Arch = Arch.resnet50
    """torchvision architecture; resnet50 is ResNet-50 v1.5 (stride in the 3x3 conv)."""
    channels_last: bool = True
    """Model weights and input batches in NHWC, the layout tensor cores want."""
    cudnn_benchmark: bool = True
    """cuDNN times candidate algorithms for each new convolution shape at its first call and keeps the fastest
    (torch.backends.cudnn.benchmark, Lightning's Trainer(benchmark=)); false takes cuDNN's heuristic pick and
    saves that time in the first step: 2.4 to 2.6 s at the defaults and 2.6 to 2.8 s at experiment=fastest on
    one H200, for no change beyond noise at the defaults and 0.9% fewer images/sec at experiment=fastest
    (docs/benchmarks.md, issue 42)."""
    compile: bool = False
    """Wrap the network in torch.compile; compilation happens during the warm-up steps."""
    compile_mode: CompileMode = CompileMode["default"]
    """torch.compile's mode: default, reduce-overhead (CUDA graphs), max-autotune (autotuned
    kernels and CUDA graphs), max-autotune-no-cudagraphs. Used when the network is compiled."""
    cuda_graphs: bool = False
    """Replay the compiled forward and backward as CUDA graphs (torch.compile's mode=reduce-overhead
    unless compile_mode is max-autotune). Needs model.compile=true and a GPU. A compiled run whose
    compile_mode captures by itself is recorded with it true (rn50/config/compilation.py)."""
    autotune_pointwise: bool = False
    """With model.compile: inductor benchmarks block sizes for each of its own pointwise and
    reduction kernels (batch norm, ReLU, residual adds) while compiling, and keeps the fastest
    (max_autotune_pointwise); its gain and compile time: docs/benchmarks.md (issue 13)."""
    autotune_coordinate_descent: bool = False
    """With model.compile: inductor refines each of its own kernels' block sizes and warps one
    step at a time while it gets faster (coordinate_descent_tuning). The first compile takes
    minutes longer (docs/benchmarks.md, issue 13); later runs of the same settings read the tuned
    configs from inductor's cache. On torch 2.11, which tunes them again (pytorch/pytorch#172819),
    rn50 turns torch's static kernel launcher off and loads a warm start's kernels in-process
    (rn50/rank/warm_compile.py; docs/measurement.md)."""
    compile_ddp: CompileDDP = CompileDDP.ddp_optimizer
    """With model.compile on more than one rank, how the compiled network meets DDP
    (torch._dynamo.config.optimize_ddp): ddp_optimizer, torch's default, splits the compiled graph at
    DDP's gradient buckets, so that each bucket's all-reduce can start while the backward goes on;
    no_optimization compiles one graph and all-reduces every gradient after the whole backward. Over
    NVLink, where the all-reduce is short, one graph was faster (docs/benchmarks.md, issue 42); over a
    slow network the overlap is what the split is for. One rank has no DDP, so it changes nothing there."""
    num_classes: Optional[int] = None
    """Width of the classifier head; null follows the data: the number of class folders in
    data.root/train for image folders (their labels), 1000 (ImageNet's) for synthetic data."""


@dataclass
class PrecisionConfig:
    """The keys every precision has; an option with keys of its own types them in a subclass,
    which its YAML file names in its defaults list (conf/precision/amp_static.yaml)."""

    _target_: str = "rn50.options.precision.Amp"
    """The precision's class (rn50/options/precision.py): Hydra's instantiate builds it from these keys."""
    name: str = "amp"
    """The option's name, as MLflow and the report show it: fp32 (TF32 off), tf32, amp (fp16,
    dynamic loss scale), amp_static (fp16, fixed scale), bf16, or a precision of yours."""


@dataclass
class AmpStaticConfig(PrecisionConfig):
    loss_scale: float = 1024.0
    """The fixed loss scale."""


@dataclass
class DataConfig:
    _target_: str = "rn50.options.pipelines.Synthetic"
    """The pipeline's class (rn50/options/pipelines.py): Hydra's instantiate builds it from these keys."""
    name: str = "synthetic"
    """The option's name, as MLflow and the report show it: synthetic (one random batch kept on
    the device), imagefolder (torchvision DataLoader), dali (NVIDIA DALI), or a pipeline of yours."""
    batch_size: Any = 256
    """Images per device per step (the global batch is this times the world size), or auto:
    each rank searches for the batch with the highest images/sec that fits (rn50/rank/batch_search.py).
    Typed Any because OmegaConf has no Union; validate() accepts a positive integer or auto."""
    image_size: int = 224
    """Square input resolution in pixels."""
    root: Optional[str] = None
    """imagefolder and dali: an ImageNet-style tree; training reads root/train/<class>/*.JPEG."""
    num_workers: int = 8
    """imagefolder: DataLoader worker processes per rank. dali: CPU threads per rank, unless
    data.dali.num_threads is set."""
    dali: DaliConfig = field(default_factory=DaliConfig)
    """data=dali's pipeline levers; the other pipelines ignore them."""


@dataclass
class DistConfig:
    nodes: int = 1
    """Number of hosts (the N in NnMg)."""
    gpus_per_node: int = 1
    """Processes per host, one per device (the M in NnMg)."""
    accelerator: Accelerator = Accelerator.auto
    """gpu, cpu (gloo, for tests), or auto: gpu when the host has one, else cpu for 1n1g."""
    interface: Optional[str] = None
    """The network interface the ranks talk over on every node (eth0, ib0), as GLOO_SOCKET_IFNAME
    and NCCL_SOCKET_IFNAME; null: gloo takes the address its hostname resolves to and NCCL picks
    one, and those variables, where set, stay (docs/multi-node.md)."""
    broadcast_buffers: bool = False
    """Whether DDP copies rank 0's batch-norm running statistics to every rank at the start of each
    forward (torch's default, true): a broadcast and a device copy per buffer (159 in ResNet-50) on every
    step's host path. Training does not read them (batch norm normalizes by the batch's own statistics),
    so false, the default (as detectron2's, fairseq's and mmdetection's DDP), leaves each rank its own, and
    train=accuracy averages them over the ranks before every validation and checkpoint. On 2 H200s rn50 ran
    1.0% faster without them over NVLink and 1.5 to 6.7% over sockets (docs/benchmarks.md, seventeenth session)."""


@dataclass
class ProfilerConfig:
    """The keys every profiler has; pytorch's and ncu's own keys are typed by their subclasses,
    which their YAML files name in their defaults lists."""

    _target_: str = "rn50.options.profilers.NoProfiler"
    """The profiler's class (rn50/options/profilers.py): Hydra's instantiate builds it from these keys."""
    name: str = "none"
    """none; simple: Lightning's SimpleProfiler; pytorch: torch.profiler; ncu: Nsight Compute; or a
    profiler of yours. pytorch and ncu profile extra steps after the measured windows."""
    nvtx: bool = True
    """NVTX ranges (data, forward, backward, optimizer) around every step on GPUs, for Nsight Systems."""


@dataclass
class TorchProfilerConfig(ProfilerConfig):
    wait: int = 1
    """Steps after the measured windows before the profiler starts warming up."""
    warmup: int = 2
    """Steps the profiler runs but discards, so its own start-up is not recorded."""
    active: int = 5
    """Steps recorded into the trace and analysed."""


@dataclass
class NcuConfig(ProfilerConfig):
    steps: int = 1
    """Steps after the measured windows whose kernels Nsight Compute profiles. One ResNet-50
    step is hundreds of kernels, each replayed per metric pass, so each step takes minutes
    (benchmarks/notes/2026-11-22-profilers-h100.md, issue 6)."""
    executable: str = "ncu"
    """The Nsight Compute command line, a path or a name on PATH."""
    metrics: Dict[str, str] = field(default_factory=dict)
    """Output name -> ncu metric; each is logged as ncu/<name>, weighted by kernel duration."""


@dataclass
class ClusterConfig:
    """The keys every cluster has; slurm's and torchrun's own keys are typed by their subclasses,
    which their YAML files name in their defaults lists."""

    _target_: str = "rn50.options.clusters.Local"
    """The cluster's class (rn50/options/clusters.py): Hydra's instantiate builds it from these keys."""
    name: str = "local"
    """Where processes start. local: one process per device on this host; slurm: one SLURM job
    per run, a task per device; torchrun: the processes of a torchrun the user started on each node."""


@dataclass
class SlurmClusterConfig(ClusterConfig):
    partition: Optional[str] = None
    """Partition to submit to; null is the cluster's default partition."""
    account: Optional[str] = None
    """Account to charge (sbatch --account)."""
    qos: Optional[str] = None
    """Quality of service (sbatch --qos)."""
    timeout_min: int = 60
    """Time limit of each job in minutes (sbatch --time)."""
    cpus_per_task: Optional[int] = None
    """CPU cores per task, i.e. per device (sbatch --cpus-per-task); null is SLURM's default."""
    sbatch: Dict[str, str] = field(default_factory=dict)
    """Any other sbatch option, without its dashes: {constraint: h100, exclusive: ""}."""


@dataclass
class TorchrunClusterConfig(ClusterConfig):
    rdzv_endpoint: str = "HEAD_NODE:29500"
    """host:port of node 0, reachable from every node; used in the printed commands."""


@dataclass
class BenchConfig:
    warmup_steps: int = 20
    """Steps run before the measured window: cuDNN autotuning, compilation, allocator warm-up."""
    steps: int = 100
    """Steps in the measured window; the device is synchronized only at its two edges."""
    repeats: int = 1
    """Windows measured back to back after one warm-up; throughput is their median."""
    comm_iters: int = 20
    """A run of several ranks: all-reduces of its gradients' size timed before its first step and after
    its last, never in a window, as nccl-tests times them (comm/allreduce_before_ms, comm/allreduce_ms,
    comm/busbw_GBps); 0 times none."""


@dataclass
class OptimConfig:
    name: OptimName = OptimName.sgd
    """sgd: SGD with momentum; lars: SGD with layer-wise adaptive rate scaling, for global
    batches of several thousand images (rn50/recipe/optimizers.py)."""
    lr: float = 0.1
    """Learning rate. train=accuracy: per 256 images of the global batch, scaled linearly
    (0.256 gives 1.024 at a global batch of 1024); train=throughput uses it as it is."""
    momentum: float = 0.9
    """SGD momentum."""
    weight_decay: float = 3.0517578125e-05
    """L2 weight decay, as in NVIDIA's ResNet-50 v1.5 recipe. train=accuracy leaves batch-norm
    parameters and biases out of it."""
    lars_trust: float = 0.001
    """lars: the trust coefficient, the largest ratio of a layer's update to its weights' norm."""
    fused: Optional[bool] = None
    """Fused SGD kernel; null means on for GPUs. Fused SGD lets AMP skip a host sync per step."""


@dataclass
class TrainConfig:
    name: TrainName = TrainName.throughput
    """throughput: the images/sec benchmark (bench.*); accuracy: train to train.target_top1,
    evaluating on data.root/val every train.eval_every_epochs (rn50/rank/training.py)."""
    epochs: int = 50
    """accuracy: epochs to train; the run goes on after the target is reached, as the recipe does."""
    target_top1: float = 0.759
    """accuracy: the validation top-1 (a fraction) whose first epoch gives time/to_target_s; MLPerf's is 0.759."""
    eval_every_epochs: int = 1
    """accuracy: validate after every this many epochs, and after the last."""
    lr_warmup_epochs: int = 8
    """accuracy: epochs of linear warm-up from 0 to the scaled learning rate; a cosine decay to 0 follows."""
    label_smoothing: float = 0.1
    """accuracy: label smoothing of the cross-entropy loss."""
    resume: bool = False
    """accuracy: continue the run in this output directory (hydra.run.dir=...) from its last
    epoch's checkpoint, in the same MLflow run."""


@dataclass
class TelemetryConfig:
    interval_s: float = 0.2
    """Seconds between NVML samples during the measured window."""


@dataclass
class MfuConfig:
    peak_tflops: Optional[float] = None
    """Override of the peak dense TFLOP/s per GPU; null looks the GPU up in `peaks`."""
    peaks: Dict[str, Dict[str, float]] = field(default_factory=dict)
    """Peak dense TFLOP/s per GPU name (as CUDA reports it) and math mode: fp32, tf32, fp16, bf16."""


@dataclass
class MlflowConfig:
    tracking_uri: str = "sqlite:///mlflow.db"
    """Where runs are recorded; conf/config.yaml points it at mlflow.db in the launch directory."""
    experiment_name: str = "rn50"
    """MLflow experiment that holds the runs."""
    run_id: Optional[str] = None
    """A run made for this job before it started, which it records into instead of making one:
    cluster=slurm creates each job's run before submitting it, and closes it by this id if SLURM
    ends the job first. null: the run is made when the job starts."""


@dataclass
class SweepConfig:
    resume: Optional[str] = None
    """--multirun only: true resumes the latest sweep of this experiment with the same overrides; a
    run id resumes that sweep. Points that FINISHED with the same config are not run again."""


@dataclass
class Rn50Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    data: DataConfig = field(default_factory=DataConfig)
    dist: DistConfig = field(default_factory=DistConfig)
    profiler: ProfilerConfig = field(default_factory=ProfilerConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    bench: BenchConfig = field(default_factory=BenchConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    mfu: MfuConfig = field(default_factory=MfuConfig)
    mlflow: MlflowConfig = field(default_factory=MlflowConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    device: Device = Device.auto
    """The settings' profile, set by the device option (conf/device/): gpu, the full default
    (ResNet-50, amp, batch 256, 20 + 100 steps) on any host; cpu, settings sized for a CPU
    (conf/device/cpu.yaml); auto, gpu where the host has a GPU, else cpu (rn50/launcher/launch.py). Keys
    given on the command line win over either profile."""
    seed: int = 0
    """Seed for weights and the synthetic batch."""
    dry_run: bool = False
    """Print what would be launched (processes, SLURM resources or torchrun commands) and stop."""


ConfigStore.instance().store(name="rn50_schema", node=Rn50Config)
# Options' own schemas, which their YAML files name in their defaults lists.
ConfigStore.instance().store(group="schema/precision", name="amp_static", node=AmpStaticConfig)
ConfigStore.instance().store(group="schema/profiler", name="pytorch", node=TorchProfilerConfig)
ConfigStore.instance().store(group="schema/profiler", name="ncu", node=NcuConfig)
ConfigStore.instance().store(group="schema/cluster", name="slurm", node=SlurmClusterConfig)
ConfigStore.instance().store(group="schema/cluster", name="torchrun", node=TorchrunClusterConfig)
