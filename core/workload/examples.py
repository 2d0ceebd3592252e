"""The files shipped in ``examples/``, one catalogue: memory snapshots and profiler traces recorded on real GPUs by
others, and flight-recorder dumps of hung jobs recorded by this lab (no public repository ships real dumps of a
hang: real gloo jobs on CPU, each rank dumping its recorder while the job was stuck).

A laptop has no GPU to record on; these files let every workload view open something real. Each entry says what
the file is, where it was recorded (``origin``), the GPU as the file names it (or that it names none), and where it
comes from (repository, path, commit, licence), so a run imported from one is labelled *recorded elsewhere* with its
GPU and source, or *recorded by this lab* (:func:`provenance`, kept in the run's ``meta["example"]``). The facts
are checked against the files themselves (``tests/core/workload/test_examples.py``); ``examples/README.md`` says
the same for a reader.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from core.errors import ConfigError
from core.paths import examples_dir

HTA = "github.com/facebookresearch/HolisticTraceAnalysis"
HTA_COMMIT = "f4d0062c382f42bd8a74838bcdad1916c7d5d2da"
KINDS = {"snapshot": "memory-snapshot", "trace": "profiler-trace", "hang": "flight-recorder"}  # kind → its import
ELSEWHERE, THIS_LAB = "elsewhere", "this lab"  # an example's origin
LAB_SOURCE = "tests/data/flight_recorder/generate.py"  # what recorded the lab's own dumps


@dataclass(frozen=True)
class Example:
    name: str  # what `--example` takes
    kind: str  # "snapshot", "trace" or "hang"
    file: str  # under examples/; a folder for a set of rank traces or a hung job's dumps
    title: str  # what it is, in a few words
    gpu: str  # the GPU as the file names it (deviceProperties), or what is known where it names none; the lab's: what ran it
    gpu_in_file: bool  # the file names its GPU: `gpu` is read from it
    repository: str
    source_path: str
    commit: str
    licence: str
    sha256: tuple[str, ...]  # of the file as shipped; of each rank file, in rank order, for a folder
    notes: str = ""
    ranks: tuple[str, ...] = ()  # a folder: its files, rank order
    origin: str = ELSEWHERE  # or THIS_LAB

    @property
    def rank_set(self) -> bool:
        """A folder of one job's rank traces, opened as its ranks side by side."""
        return self.kind == "trace" and bool(self.ranks)

    @property
    def experiment(self) -> str:
        """The import that opens it: a set of rank traces as one job's ranks, side by side."""
        return "profiler-trace-ranks" if self.rank_set else KINDS[self.kind]

    @property
    def command(self) -> str:
        """The command that opens it."""
        return f"python -m core {self.kind} --example {self.name}"

    @property
    def label(self) -> str:
        """'recorded elsewhere on <GPU> (<repository>)' or 'recorded by this lab: <what ran it> (<what recorded
        it>)': what every view of an imported example says."""
        if self.origin == THIS_LAB:
            return f"recorded by this lab: {self.gpu} ({self.source_path})"
        return f"recorded elsewhere on {self.gpu} ({self.repository})"


def _lab_hang(name: str, folder: str, title: str, sha256: tuple[str, ...], more: str = "") -> Example:
    """A hung gloo job recorded by this lab (``LAB_SOURCE``): its folder under ``examples/flight_recorder``, one
    dump per rank (``rank0``…), digests in rank order."""
    return Example(
        name=name,
        kind="hang",
        file=f"flight_recorder/{folder}",
        title=title,
        gpu="a gloo job on CPU",
        gpu_in_file=False,
        repository="this repository",
        source_path=LAB_SOURCE,
        commit="",
        licence="this repository's",
        sha256=sha256,
        notes=f"torch 2.13.0+cpu, recorder version 2.10{more}",
        ranks=tuple(f"rank{i}" for i in range(len(sha256))),
        origin=THIS_LAB,
    )


EXAMPLES: tuple[Example, ...] = (
    Example(
        name="train-step-snapshot",
        kind="snapshot",
        file="snapshots/cs336_train_step.pickle.gz",
        title="one training step of a small Transformer (torch.compile forward, backward, AdamW), C++ stacks",
        gpu="an unnamed CUDA GPU",
        gpu_in_file=False,
        repository="github.com/bcrafton/assignment2-systems",
        source_path="memory_snapshot.pickle",
        commit="0c0e8a736edbf5f55ec1a3536fd0f126a9eb9ee9",
        licence="MIT (Copyright 2025 Stanford University)",
        sha256=("4a1f21ac66eb1cc858ffd963e3d41de4a06962991cbd07730d933a2435dd3676",),
        notes="a snapshot names no GPU; the repository's script calls .to('cuda'); gzip -9 -n of the original",
    ),
    Example(
        name="forward-fp32-snapshot",
        kind="snapshot",
        file="snapshots/cs336_forward_fp32.pickle.gz",
        title="forward pass of a Transformer, context 128, fp32",
        gpu="an unnamed CUDA GPU",
        gpu_in_file=False,
        repository="github.com/silmont2000/assignment2-systems",
        source_path="memory_forward_fp32_128.pickle",
        commit="75d09aad44d65bcf350114d4beaf1d3a7cde42db",
        licence="MIT (Copyright 2025 Stanford University)",
        sha256=("50412842d405e0e933cf143842710121215c0514e7f3b6c3d6ad493ac31806f0",),
        notes="the bf16 example is the same pass in bf16: compare the two; gzip -9 -n of the original",
    ),
    Example(
        name="forward-bf16-snapshot",
        kind="snapshot",
        file="snapshots/cs336_forward_bf16.pickle.gz",
        title="forward pass of a Transformer, context 128, bf16",
        gpu="an unnamed CUDA GPU",
        gpu_in_file=False,
        repository="github.com/silmont2000/assignment2-systems",
        source_path="memory_forward_bf16_128.pickle",
        commit="75d09aad44d65bcf350114d4beaf1d3a7cde42db",
        licence="MIT (Copyright 2025 Stanford University)",
        sha256=("a9f5d758def46edd1d6607db8104a76996fcc08bafeda31757115c8657b32deb",),
        notes="gzip -9 -n of the original",
    ),
    Example(
        name="resnet50-v100",
        kind="trace",
        file="traces/resnet50_ddp_v100.json.gz",
        title="ResNet-50 training with DDP and SGD, 5 steps",
        gpu="Tesla V100-SXM2-32GB",
        gpu_in_file=True,
        repository=HTA,
        source_path="tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
        commit=HTA_COMMIT,
        licence="MIT",
        sha256=("e279d7280e73719e8dd9550e120cfe081fbe268596bd297fe5fcbf63e2b75a09",),
        notes="the same model as resnet50-a100 (53 convolutions and batch norms, one linear per step), "
        "world size 1; batch size and settings are not recorded",
    ),
    Example(
        name="resnet50-a100",
        kind="trace",
        file="traces/resnet50_ddp_a100.json.gz",
        title="ResNet-50 training with DDP and SGD, 3 steps",
        gpu="NVIDIA A100-PG509-200",
        gpu_in_file=True,
        repository=HTA,
        source_path="tests/data/nccl_parser_config/nccl_data.json.gz",
        commit=HTA_COMMIT,
        licence="MIT",
        sha256=("c1cf9c575fdcd7bdc6326ceab834f94b351f81ae55577a7471aa9e328fb8b58e",),
        notes="the same model as resnet50-v100, rank 0 of 2 (NCCL all-reduce); batch size and settings are "
        "not recorded",
    ),
    Example(
        name="toy-mi250",
        kind="trace",
        file="traces/mi250_toy_rocm.json.gz",
        title="a toy model trained on an AMD MI250 GCD (ROCm 6.2, Tensile GEMMs), 1 step (the profiler stopped 49 µs "
        "into a second, before its first kernel)",
        gpu="AMD Radeon Graphics",
        gpu_in_file=True,
        repository=HTA,
        source_path="tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
        commit=HTA_COMMIT,
        licence="MIT",
        sha256=("39fdab670f9e80a05ccc6d0d07611b3aeba1092fa10681d8dd08cea48d0488b5",),
        notes="the file names the GPU 'AMD Radeon Graphics'; the source calls it an MI250 (computeMajor 9, 104 CUs)",
    ),
    Example(
        name="recsys-a100-ranks",
        kind="trace",
        file="traces/recsys_a100_2_of_128_ranks",
        title="a recommendation model (FBGEMM embeddings), ranks 0 and 1 of 128, 2 steps",
        gpu="an sm_80 GPU (A100 class)",
        gpu_in_file=False,
        repository=HTA,
        source_path="tests/data/trace_filter/sampled_rank-0.json.gz, sampled_rank-1.json.gz",
        commit=HTA_COMMIT,
        licence="MIT",
        sha256=(
            "71b98c30a2751cc56d9bf78f8fb76467acd56e0be6a1f0da23c600941d29aafd",
            "2f9a65fd5f319ec8e60468a22dc9a624eb4b40369c729f6f897259d587eca57e",
        ),
        notes="the files list no deviceProperties; their kernels are built for sm_80 (cutlass_80, ampere_sgemm)",
        ranks=("rank-0.json.gz", "rank-1.json.gz"),
    ),
    _lab_hang(
        "hang-skipped-rank",
        "skipped_rank",
        "4 ranks, rank 3 never enters the 4th all_reduce",
        (
            "0afb359806994f1dd52fc5bda2b6523a40d7669948088cb2a1098ba710c131bf",
            "c269f785b49c031c2866720c97c976edd7335c653fc1a7e006e075dac7a05028",
            "fa67a8f9fe6bd92d00f1641f24662c4fa45b834c9e4f8b36e6858dbaf3df7bdb",
            "85412f24b76e9c86aa8f7ba577cf0ada8b40f521a4941371e0dcaddabc2abfee",
        ),
        "; ranks 0–2 wait in the 4th all_reduce",
    ),
    _lab_hang(
        "hang-desync-op",
        "desync_op",
        "3 ranks, rank 1 calls broadcast where the others all_reduce",
        (
            "60fac95108227a9db7ce24c448885326bbb9139262255b5c0dab2a1000f1dd76",
            "aeecda12101d71fe535aced1b158f13bebf16a8bc1de26c183972250e6535e90",
            "91976ac1833eeff6a85053766fdc049bab493a3d9d8fce7e603739836c4bd961",
        ),
    ),
)


def find(name: str, kind: str | None = None) -> Example:
    """The example called ``name`` (of ``kind``, where given); a ConfigError listing the names otherwise."""
    for example in EXAMPLES:
        if example.name == name and kind in (None, example.kind):
            return example
    if kind == "hang":
        sets = ", ".join(e.name for e in of_kind(kind))
        raise ConfigError(f"example: no dump set is called {name!r}; the dump sets are {sets}")
    raise ConfigError(f"example: no example is called {name!r}; the examples are {', '.join(e.name for e in EXAMPLES)}")


def of_kind(kind: str) -> list[Example]:
    return [e for e in EXAMPLES if e.kind == kind]


def location(example: Example) -> Path:
    """Where the example's file (or folder of rank files) lies in this copy of the lab."""
    return examples_dir() / example.file


def import_path(example: Example) -> Path:
    """The file an import reads: the file itself, or a set's first rank (a single-file import reads one rank)."""
    where = location(example)
    return where / example.ranks[0] if example.ranks else where


def present(example: Example) -> bool:
    return import_path(example).is_file()


def missing_text(example: Example) -> str:
    return (
        f"example {example.name}: {import_path(example)} is not on this machine — this copy of the lab was "
        "installed without examples/ (they ship with the repository and the Docker image; GPULAB_EXAMPLES_DIR "
        "names another folder)"
    )


def resolve(name: str) -> tuple[Example, Path]:
    """The example and the file to import, or a ConfigError saying which is missing."""
    example = find(name)
    if not present(example):
        raise ConfigError(missing_text(example))
    return example, import_path(example)


def files(example: Example) -> list[Path]:
    """The example's files: the file, or each rank's, in rank order."""
    where = location(example)
    return [where / r for r in example.ranks] if example.ranks else [where]


def size_bytes(example: Example) -> int:
    return sum(f.stat().st_size for f in files(example) if f.is_file())


def provenance(example: Example) -> dict:
    """What a run imported from the example keeps in ``meta["example"]``: the label travels with the run."""
    fields = asdict(example)
    fields["label"] = example.label
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in fields.items() if k != "sha256"}


def config_path(name: str, kind: str, path: str) -> str:
    """An import config's file when it names an example: the example's file (a ConfigError when it is not a
    ``kind`` example, is missing, or another file is named too)."""
    example, where = resolve(name)
    if example.kind != kind:
        others = ", ".join(e.name for e in of_kind(kind))
        raise ConfigError(f"example: {name} is a {example.kind}, not a {kind}; the {kind} examples are {others}")
    if path and Path(path).resolve() != where.resolve():
        raise ConfigError(f"example: name a file or an example, not both ({path!r} and {name})")
    return str(where)


def rank_paths(name: str, paths: tuple[str, ...]) -> tuple[str, ...]:
    """A ranks import's files when it names an example: the example's rank files (a ConfigError when it is not
    a set of ranks, is missing, or files are named too)."""
    example = find(name)
    if not example.rank_set:
        sets = ", ".join(e.name for e in EXAMPLES if e.rank_set)
        raise ConfigError(f"example: {name} is one trace, not a set of ranks; the rank sets are {sets}")
    resolve(name)
    own = tuple(str(f) for f in files(example))
    if paths and [Path(p).resolve() for p in paths] != [Path(p).resolve() for p in own]:
        raise ConfigError(f"example: name files or an example, not both ({len(paths)} file(s) and {name})")
    return own


def dump_paths(name: str, given: tuple[str, ...]) -> tuple[str, ...]:
    """A hang import's files when it names a dump set: the set's dumps, in rank order (a ConfigError when it is
    not a dump set, is missing, or files are named too)."""
    example = find(name, "hang")
    if any(given):
        raise ConfigError(f"example: name files or an example, not both ({name})")
    resolve(name)
    return tuple(str(f) for f in files(example))


def label(meta: dict, name: str) -> None:
    """Mark an import's meta as the example ``name``: its provenance, and its GPU where the file names none."""
    example = find(name)
    meta["example"] = provenance(example)
    if not example.gpu_in_file:
        meta["device_name"] = example.gpu
