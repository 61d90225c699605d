"""Named cluster presets and YAML/JSON cluster files.

File schema (YAML or JSON, chosen by extension; ``.yml``/``.yaml`` -> YAML, anything else JSON)::

    name: my-cluster
    source: where the figures come from
    notes: optional free text
    servers:
      - {name: gpu-a, gpu_type: V100, n_gpus: 4, cpu_cores: 32, memory_gb: 244, nic_gbps: 10, intra_gbps: 1200}
      - {gpu_type: T4, n_gpus: 4, cpu_cores: 48, memory_gb: 192, count: 3}   # a group of 3 identical servers

``count`` expands a group; a group's servers are named ``<name>-<i>`` (``<cluster>-s<k>`` when unnamed).
Errors name the file, the server index and the field, e.g.
``cluster.yaml: servers[3].gpu_type: unknown GPU type 'X100' (known: ...)``.

Bandwidths are in gigabits per second. Conventions used by the presets:
PCIe 3.0 x16 = 15.75 GB/s = 126 Gbps (the figure Hare §5.1 quotes); NVLink 2.0 on V100 = 6 links x
25 GB/s per direction = 150 GB/s = 1,200 Gbps.
"""
from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path
from typing import Any, Callable

import yaml

from .hardware import GPU_TYPES, ClusterSpec, ServerSpec

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
PCIE3_GBPS = 126.0
NVLINK2_GBPS = 1200.0

_SERVER_FIELDS = ("name", "gpu_type", "n_gpus", "cpu_cores", "memory_gb", "nic_gbps", "intra_gbps", "count")
# Bounds of a cluster file, so a typo (``count: 1e8``) is an error instead of a hang: ten times the largest server
# count and twice the largest GPUs per server of the presets and machines we know (PAI 1,534 servers; 16-GPU DGX-2)
MAX_SERVERS = 100_000
MAX_GPUS_PER_SERVER = 32


class ClusterFileError(ValueError):
    """A malformed cluster file; the message names file, server index and field."""


# ------------------------------------------------------------------------------------------ presets
def _group(prefix: str, n: int, gpu: str, gpus: int, cpu: float, mem: float, nic: float, intra: float,
           start: int = 0) -> list[ServerSpec]:
    return [ServerSpec(f"{prefix}-{i}", gpu, gpus, cpu, mem, nic, intra) for i in range(start, start + n)]


def _mlfs_80() -> ClusterSpec:
    return ClusterSpec(
        "mlfs-80", tuple(_group("p3", 20, "V100", 4, 32, 244, 10.0, NVLINK2_GBPS)),
        source="MLFS (CoNEXT '20) §4.1 real implementation: 20 AWS p3.8xlarge = 4 V100 (16 GB, NVLink), "
               "32 vCPU, 244 GB each; 80 GPUs",
        notes="NIC 10 Gbps (p3.8xlarge network figure); NVLink 2.0 taken as 1,200 Gbps per GPU direction.")


# Philly (MLFS's 2,474-GPU / 550-server simulation): the server mix is not published. 477 x 4 + 70 x 8 +
# 3 x 2 = 1,908 + 560 + 6 = 2,474 GPUs on 550 servers: mostly 4-GPU servers, some 8-GPU, and three 2-GPU
# ones, the smallest 2/4/8 mix that hits both totals exactly with a majority of 4-GPU servers.
MLFS_2474_GROUPS = ((477, 4, "P100"), (70, 8, "V100"), (3, 2, "P100"))


def _mlfs_2474() -> ClusterSpec:
    servers: list[ServerSpec] = []
    for n, g, gpu in MLFS_2474_GROUPS:
        servers += _group(f"philly-{g}g", n, gpu, g, 8 * g, 61 * g, 10.0, PCIE3_GBPS)
    return ClusterSpec(
        "mlfs-2474", tuple(servers),
        source="MLFS (CoNEXT '20) §4.1 trace-driven simulation of Microsoft Philly: 550 servers, 2,474 GPUs",
        notes="Assumed (not published): 477 4-GPU P100 + 70 8-GPU V100 + 3 2-GPU P100 servers. Philly had "
              "12 GB and 24 GB GPUs of undisclosed model; P100/V100 stand for its older/newer generation. "
              "Host resources scaled per GPU as on p3 instances (8 vCPU, 61 GB per GPU); NIC 10 Gbps as in "
              "MLFS's testbed; PCIe 3.0 inside servers.")


# Hare (§5): testbed 8 V100 : 4 T4 : 1 K80 : 2 M60; simulation at 160 GPUs in 40 groups of 4.
# Largest-remainder rounding of 40 x (8, 4, 1, 2) / 15 = (21.33, 10.67, 2.67, 5.33) -> (21, 11, 3, 5) servers.
HARE_160_GROUPS = (("V100", 21, 32, 244), ("T4", 11, 48, 192), ("K80", 3, 16, 244), ("M60", 5, 64, 488))


def _hare_160() -> ClusterSpec:
    servers: list[ServerSpec] = []
    for gpu, n, cpu, mem in HARE_160_GROUPS:
        servers += _group(f"hare-{gpu.lower()}", n, gpu, 4, cpu, mem, 25.0, PCIE3_GBPS)
    return ClusterSpec(
        "hare-160", tuple(servers),
        source="Hare §5: 160 GPUs in 40 groups of 4 (Figs. 17-25), high heterogeneity = V100 x T4 x K80 x M60; "
               "type proportions of its 15-GPU testbed (8 V100, 4 T4, 1 K80, 2 M60); 25 Gbps Ethernet; "
               "PCIe 3.0 x16 (15.75 GB/s)",
        notes="Counts per type are not stated in the paper: 21/11/3/5 servers = largest-remainder rounding of "
              "the testbed's 8:4:1:2 to 40 servers (84 V100, 44 T4, 12 K80, 20 M60). Host resources from the "
              "EC2 instance family of each type (p3.8xlarge; g4dn.12xlarge; half a p2.8xlarge; g3.16xlarge).")


def _gavel_108() -> ClusterSpec:
    servers: list[ServerSpec] = []
    for gpu in ("V100", "P100", "K80"):
        servers += _group(f"gavel-{gpu.lower()}", 9, gpu, 4, 32, 244, 10.0, PCIE3_GBPS)
    return ClusterSpec(
        "gavel-108", tuple(servers),
        source="Gavel (OSDI '20) simulated heterogeneous cluster: 36 V100 + 36 P100 + 36 K80",
        notes="4 GPUs per server (9 servers per type); host resources (32 vCPU, 244 GB), 10 Gbps NIC and PCIe "
              "are assumptions: Gavel's simulator models GPUs only.")


def _pai_groups() -> list[dict[str, Any]]:
    with open(DATA_DIR / "pai_2020_machine_groups.csv", newline="") as f:
        return list(csv.DictReader(f))


def _pai_2020() -> ClusterSpec:
    servers: list[ServerSpec] = []
    for r in _pai_groups():
        if not r["gpu_type"]:
            continue  # CPU-only machines and MISC (GPU model not disclosed)
        prefix = f"pai-{r['pai_gpu_type'].lower()}-{r['memory_gb']}g"
        servers += _group(prefix, int(r["count"]), r["gpu_type"], int(r["n_gpus"]), float(r["cpu_cores"]),
                          float(r["memory_gb"]), 10.0, PCIE3_GBPS)
    return ClusterSpec(
        "pai-2020", tuple(servers),
        source="Alibaba PAI GPU trace v2020 pai_machine_spec (Weng et al., NSDI '22; CC-BY-4.0), aggregated in "
               "envs/data/pai_2020_machine_groups.csv",
        notes="Kept: P100 (798 x 2), T4 (497 x 2), V100 (104 x 8), V100M32 (135 x 8, mapped to V100: the "
              "catalogue has one V100 type) = 1,534 servers, 4,502 GPUs. Dropped: 280 MISC machines (2,240 GPUs "
              "of undisclosed model) and 83 CPU-only machines. cap_cpu/cap_mem as given; NIC 10 Gbps and "
              "PCIe inside servers are assumptions (not in the trace).")


def _tiny_8() -> ClusterSpec:
    return ClusterSpec("tiny-8", tuple(_group("tiny", 2, "V100", 4, 32, 244, 10.0, NVLINK2_GBPS)),
                       source="test preset: 2 x p3.8xlarge-like servers (4 V100 each)")


def _hetero_16() -> ClusterSpec:
    servers = tuple(ServerSpec(f"hetero-{g.lower()}", g, 4, 32, 244, 10.0, PCIE3_GBPS)
                    for g in ("V100", "P100", "K80", "T4"))
    return ClusterSpec("hetero-16", servers, source="test preset: one 4-GPU server each of V100, P100, K80, T4")


# Pollux (OSDI '21) §5.1 testbed: 16 AWS g4dn.12xlarge nodes = 4 T4 (16 GB), 48 vCPU, 192 GB each; g4dn.12xlarge's
# network figure is 50 Gbps. The catalogue's T4 speeds are measured from Pollux's own profiles (docs/catalogue.md).
def _pollux_64() -> ClusterSpec:
    return ClusterSpec(
        "pollux-64", tuple(_group("g4dn", 16, "T4", 4, 48, 192, 50.0, PCIE3_GBPS)),
        source="Pollux (OSDI '21) §5.1 testbed: 16 AWS g4dn.12xlarge = 4 T4 (16 GB), 48 vCPU, 192 GB each; 64 GPUs",
        notes="NIC 50 Gbps (g4dn.12xlarge network figure); T4s linked by PCIe 3.0 inside a node.")


# UniSched (IEEE TC '24) §V-A physical testbed: 16 nodes, each 4 Tesla V100-32GB on PCIe 3.0 x16, one 200 Gbps HDR
# InfiniBand NIC, 64 CPU cores and 256 GB of memory.
def _unisched_64() -> ClusterSpec:
    return ClusterSpec(
        "unisched-64", tuple(_group("unisched", 16, "V100", 4, 64, 256, 200.0, PCIE3_GBPS)),
        source="UniSched (IEEE TC '24) §V-A physical testbed: 16 nodes x 4 Tesla V100-32GB (PCIe 3.0 x16), 1 x 200 Gbps "
               "HDR InfiniBand, 64 CPU cores, 256 GB each; 64 GPUs",
        notes="The catalogue's V100 has 16 GB (one V100 type), so GPU memory admission is stricter than on the "
              "testbed's 32 GB cards; the InfiniBand link is modelled as a 200 Gbps NIC shared by the jobs "
              "crossing it, like any other NIC.")


# UniSched (IEEE TC '24) §IV-B: its simulator's C96, "96 nodes ... with 8 GPUs per node"; the rest is not given.
def _unisched_c96() -> ClusterSpec:
    return ClusterSpec(
        "unisched-c96", tuple(_group("c96", 96, "V100", 8, 128, 512, 200.0, PCIE3_GBPS)),
        source="UniSched (IEEE TC '24) §IV-B simulated cluster C96: 96 nodes x 8 GPUs; 768 GPUs",
        notes="Assumed (not given): V100 GPUs, PCIe 3.0 x16 inside a node and one 200 Gbps NIC, as on UniSched's "
              "physical testbed (whose simulator takes its speeds from profiles of that testbed), and the "
              "testbed's host resources per GPU (16 cores, 64 GB).")


_PRESETS: dict[str, Callable[[], ClusterSpec]] = {
    "mlfs-80": _mlfs_80,
    "mlfs-2474": _mlfs_2474,
    "hare-160": _hare_160,
    "gavel-108": _gavel_108,
    "pai-2020": _pai_2020,
    "tiny-8": _tiny_8,
    "hetero-16": _hetero_16,
    "pollux-64": _pollux_64,
    "unisched-64": _unisched_64,
    "unisched-c96": _unisched_c96,
}


def preset_names() -> list[str]:
    return list(_PRESETS)


def cluster_preset(name: str) -> ClusterSpec:
    try:
        return _PRESETS[name]()
    except KeyError:
        raise KeyError(f"unknown cluster preset {name!r}; known: {', '.join(_PRESETS)}") from None


# ------------------------------------------------------------------------------------------ files
def _is_yaml(path: Path) -> bool:
    return path.suffix.lower() in (".yml", ".yaml")


def _num(fname: str, where: str, raw: Any, *, integer: bool = False) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ClusterFileError(f"{where}: expected a number, got {raw!r}")
    if integer and (not float(raw).is_integer()):
        raise ClusterFileError(f"{where}: expected an integer, got {raw!r}")
    if not math.isfinite(raw) or raw <= 0:
        raise ClusterFileError(f"{where}: must be > 0, got {raw!r}")
    return int(raw) if integer else float(raw)


def _check_size(at: str, n_gpus: float, count: float, so_far: int) -> None:
    """A server group within :data:`MAX_GPUS_PER_SERVER` and the file within :data:`MAX_SERVERS` servers."""
    if n_gpus > MAX_GPUS_PER_SERVER:
        raise ClusterFileError(f"{at}.n_gpus: at most {MAX_GPUS_PER_SERVER} GPUs per server, got {n_gpus:g}")
    if so_far + count > MAX_SERVERS:
        raise ClusterFileError(f"{at}.count: the file would hold {so_far + count:g} servers, more than the "
                               f"{MAX_SERVERS} allowed (a typo?)")


def load_cluster(path: str | os.PathLike) -> ClusterSpec:
    """Read a cluster from a YAML or JSON file (schema in the module docstring)."""
    path = Path(path)
    fn = path.name
    try:
        text = path.read_text()
    except OSError as e:
        raise ClusterFileError(f"{fn}: cannot read: {e}") from e
    try:
        doc = yaml.safe_load(text) if _is_yaml(path) else json.loads(text)
    except (yaml.YAMLError, json.JSONDecodeError) as e:
        raise ClusterFileError(f"{fn}: not valid {'YAML' if _is_yaml(path) else 'JSON'}: {e}") from e
    if not isinstance(doc, dict):
        raise ClusterFileError(f"{fn}: top level must be a mapping with 'name' and 'servers'")
    unknown = set(doc) - {"name", "source", "notes", "servers"}
    if unknown:
        raise ClusterFileError(f"{fn}: unknown top-level field(s) {sorted(unknown)}")
    name = doc.get("name", path.stem)
    if not isinstance(name, str) or not name:
        raise ClusterFileError(f"{fn}: name: expected a non-empty string, got {name!r}")
    servers_raw = doc.get("servers")
    if not isinstance(servers_raw, list) or not servers_raw:
        raise ClusterFileError(f"{fn}: servers: expected a non-empty list, got {servers_raw!r}")
    servers: list[ServerSpec] = []
    seen: set[str] = set()
    for i, s in enumerate(servers_raw):
        at = f"{fn}: servers[{i}]"
        if not isinstance(s, dict):
            raise ClusterFileError(f"{at}: expected a mapping, got {s!r}")
        extra = set(s) - set(_SERVER_FIELDS)
        if extra:
            raise ClusterFileError(f"{at}.{sorted(extra)[0]}: unknown field (allowed: {', '.join(_SERVER_FIELDS)})")
        for req in ("gpu_type", "n_gpus", "cpu_cores", "memory_gb"):
            if req not in s:
                raise ClusterFileError(f"{at}.{req}: missing required field")
        g = s["gpu_type"]
        if g not in GPU_TYPES:
            raise ClusterFileError(f"{at}.gpu_type: unknown GPU type {g!r} (known: {', '.join(GPU_TYPES)})")
        n_gpus = _num(fn, f"{at}.n_gpus", s["n_gpus"], integer=True)
        cpu = _num(fn, f"{at}.cpu_cores", s["cpu_cores"])
        mem = _num(fn, f"{at}.memory_gb", s["memory_gb"])
        nic = _num(fn, f"{at}.nic_gbps", s["nic_gbps"]) if "nic_gbps" in s else 10.0
        intra = _num(fn, f"{at}.intra_gbps", s["intra_gbps"]) if "intra_gbps" in s else 100.0
        count = _num(fn, f"{at}.count", s["count"], integer=True) if "count" in s else 1
        _check_size(at, n_gpus, count, len(servers))
        base = s.get("name")
        if base is not None and (not isinstance(base, str) or not base):
            raise ClusterFileError(f"{at}.name: expected a non-empty string, got {base!r}")
        for k in range(int(count)):
            if base is None:
                sname = f"{name}-s{len(servers)}"
            else:
                sname = base if count == 1 else f"{base}-{k}"
            if sname in seen:
                raise ClusterFileError(f"{at}.name: duplicate server name {sname!r}")
            seen.add(sname)
            servers.append(ServerSpec(sname, g, int(n_gpus), cpu, mem, nic, intra))
    return ClusterSpec(name, tuple(servers), str(doc.get("source", "") or ""), notes=str(doc.get("notes", "") or ""))


def cluster_to_dict(spec: ClusterSpec, group: bool = True) -> dict[str, Any]:
    """The file form of ``spec``. With ``group``, runs of identical servers named ``<p>-<i>`` (i = 0..n-1)
    collapse to one entry with ``count``."""
    entries: list[dict[str, Any]] = []

    def fields(s: ServerSpec) -> dict[str, Any]:
        return {"gpu_type": s.gpu_type, "n_gpus": s.n_gpus, "cpu_cores": s.cpu_cores, "memory_gb": s.memory_gb,
                "nic_gbps": s.nic_gbps, "intra_gbps": s.intra_gbps}

    i = 0
    srv = spec.servers
    while i < len(srv):
        s = srv[i]
        prefix, _, idx = s.name.rpartition("-")
        j = i
        if group and prefix and idx == "0":
            while (j + 1 < len(srv) and srv[j + 1].name == f"{prefix}-{j + 1 - i}"
                   and fields(srv[j + 1]) == fields(s)):
                j += 1
        if j > i:
            entries.append({"name": prefix, **fields(s), "count": j - i + 1})
        else:
            entries.append({"name": s.name, **fields(s)})
        i = j + 1
    out: dict[str, Any] = {"name": spec.name, "source": spec.source}
    if spec.notes:
        out["notes"] = spec.notes
    out["servers"] = entries
    return out


def save_cluster(spec: ClusterSpec, path: str | os.PathLike) -> None:
    """Write ``spec`` as YAML (``.yml``/``.yaml``) or JSON; :func:`load_cluster` reads it back equal."""
    path = Path(path)
    d = cluster_to_dict(spec)
    if _is_yaml(path):
        path.write_text(yaml.safe_dump(d, sort_keys=False, width=120))
    else:
        path.write_text(json.dumps(d, indent=1) + "\n")
