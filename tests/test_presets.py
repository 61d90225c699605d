"""Cluster presets and YAML/JSON cluster files."""
from __future__ import annotations

import json

import pytest
import yaml

from clustergym.core.hardware import GPU_TYPES, ClusterSpec
from clustergym.core.presets import ClusterFileError, cluster_preset, load_cluster, preset_names, save_cluster

EXPECTED = {  # name: (servers, GPUs, per-type GPU counts)
    "mlfs-80": (20, 80, {"V100": 80}),
    "mlfs-2474": (550, 2474, None),
    "hare-160": (40, 160, {"V100": 84, "T4": 44, "K80": 12, "M60": 20}),
    "gavel-108": (27, 108, {"V100": 36, "P100": 36, "K80": 36}),
    "pai-2020": (1534, 4502, {"P100": 1596, "T4": 994, "V100": 1912}),
    "tiny-8": (2, 8, {"V100": 8}),
    "hetero-16": (4, 16, {"V100": 4, "P100": 4, "K80": 4, "T4": 4}),
    "pollux-64": (16, 64, {"T4": 64}),
    "unisched-64": (16, 64, {"V100": 64}),
    "unisched-c96": (96, 768, {"V100": 768}),
}


def test_preset_names():
    assert set(preset_names()) == set(EXPECTED)
    with pytest.raises(KeyError, match="known"):
        cluster_preset("nope")


@pytest.mark.parametrize("name", list(EXPECTED))
def test_preset_counts(name):
    c = cluster_preset(name)
    n_srv, n_gpu, counts = EXPECTED[name]
    assert isinstance(c, ClusterSpec) and c.name == name
    assert c.n_servers == n_srv and c.n_gpus == n_gpu
    if counts is not None:
        assert c.gpu_counts() == counts
    assert c.source
    assert all(s.gpu_type in GPU_TYPES for s in c.servers)


def test_mlfs_80_is_p3_8xlarge():
    for s in cluster_preset("mlfs-80").servers:
        assert (s.gpu_type, s.n_gpus, s.cpu_cores, s.memory_gb, s.nic_gbps) == ("V100", 4, 32, 244, 10.0)


def test_unisched_64_is_the_unisched_testbed():
    # UniSched §V-A: 16 nodes x 4 V100, 64 cores, 256 GB, one 200 Gbps HDR InfiniBand NIC, PCIe 3.0 x16
    from clustergym.core.presets import PCIE3_GBPS
    for s in cluster_preset("unisched-64").servers:
        assert (s.gpu_type, s.n_gpus, s.cpu_cores, s.memory_gb, s.nic_gbps, s.intra_gbps) == (
            "V100", 4, 64, 256, 200.0, PCIE3_GBPS)


def test_mlfs_2474_mostly_4_gpu():
    c = cluster_preset("mlfs-2474")
    sizes = [s.n_gpus for s in c.servers]
    assert sizes.count(4) > len(sizes) / 2 and set(sizes) <= {2, 4, 8}


def test_pai_matches_bundled_groups():
    import csv
    from clustergym.core.presets import DATA_DIR
    rows = list(csv.DictReader(open(DATA_DIR / "pai_2020_machine_groups.csv")))
    assert sum(int(r["count"]) for r in rows) == 1897  # machines in the PAI spec
    assert sum(int(r["count"]) * int(r["n_gpus"]) for r in rows) == 6742


@pytest.mark.parametrize("ext", [".yaml", ".yml", ".json"])
@pytest.mark.parametrize("name", ["hare-160", "hetero-16", "mlfs-2474", "pai-2020"])
def test_round_trip(tmp_path, name, ext):
    c = cluster_preset(name)
    p = tmp_path / f"c{ext}"
    save_cluster(c, p)
    c2 = load_cluster(p)
    assert c2 == c and c2.notes == c.notes
    if name == "mlfs-2474":  # groups collapse to `count`
        doc = yaml.safe_load(p.read_text()) if ext != ".json" else json.loads(p.read_text())
        assert len(doc["servers"]) == 3


def test_count_expansion_and_defaults(tmp_path):
    p = tmp_path / "cluster.yaml"
    p.write_text(yaml.safe_dump({"name": "x", "source": "s", "servers": [
        {"gpu_type": "V100", "n_gpus": 4, "cpu_cores": 32, "memory_gb": 244, "count": 2},
        {"name": "t4box", "gpu_type": "T4", "n_gpus": 4, "cpu_cores": 48, "memory_gb": 192, "count": 3,
         "nic_gbps": 25},
        {"name": "solo", "gpu_type": "K80", "n_gpus": 1, "cpu_cores": 4, "memory_gb": 61}]}))
    c = load_cluster(p)
    assert [s.name for s in c.servers] == ["x-s0", "x-s1", "t4box-0", "t4box-1", "t4box-2", "solo"]
    assert c.n_gpus == 4 * 2 + 4 * 3 + 1
    assert c.servers[2].nic_gbps == 25 and c.servers[0].nic_gbps == 10.0


def _write(tmp_path, servers, fname="cluster.yaml"):
    p = tmp_path / fname
    p.write_text(yaml.safe_dump({"name": "bad", "servers": servers}))
    return p


GOOD = {"gpu_type": "V100", "n_gpus": 4, "cpu_cores": 32, "memory_gb": 244}


@pytest.mark.parametrize("bad, field, text", [
    ({**GOOD, "gpu_type": "X100"}, "gpu_type", "unknown GPU type 'X100' (known: K80"),
    ({k: v for k, v in GOOD.items() if k != "n_gpus"}, "n_gpus", "missing"),
    ({**GOOD, "n_gpus": 0}, "n_gpus", "> 0"),
    ({**GOOD, "n_gpus": 2.5}, "n_gpus", "integer"),
    ({**GOOD, "memory_gb": "lots"}, "memory_gb", "number"),
    ({**GOOD, "count": -1}, "count", "> 0"),
    ({**GOOD, "gpus": 4}, "gpus", "unknown field"),
])
def test_malformed_names_file_index_field(tmp_path, bad, field, text):
    p = _write(tmp_path, [GOOD, GOOD, GOOD, bad])
    with pytest.raises(ClusterFileError) as e:
        load_cluster(p)
    msg = str(e.value)
    assert msg.startswith(f"cluster.yaml: servers[3].{field}: "), msg
    assert text in msg


def test_exact_message_example(tmp_path):
    p = _write(tmp_path, [GOOD, GOOD, GOOD, {**GOOD, "gpu_type": "X100"}])
    with pytest.raises(ClusterFileError, match=r"^cluster\.yaml: servers\[3\]\.gpu_type: unknown GPU type 'X100' "
                                               r"\(known: K80, M60, P100, V100, T4, A100, H100\)$"):
        load_cluster(p)


def test_malformed_top_level(tmp_path):
    p = tmp_path / "c.json"
    p.write_text("{not json")
    with pytest.raises(ClusterFileError, match=r"^c\.json: not valid JSON"):
        load_cluster(p)
    p.write_text(json.dumps({"name": "x", "servers": []}))
    with pytest.raises(ClusterFileError, match=r"^c\.json: servers:"):
        load_cluster(p)
    p.write_text(json.dumps({"name": "x", "servers": [GOOD, "oops"]}))
    with pytest.raises(ClusterFileError, match=r"^c\.json: servers\[1\]: expected a mapping"):
        load_cluster(p)
    p.write_text(json.dumps({"name": "x", "servers": [{**GOOD, "name": "a"}, {**GOOD, "name": "a"}]}))
    with pytest.raises(ClusterFileError, match=r"servers\[1\]\.name: duplicate server name 'a'"):
        load_cluster(p)
    with pytest.raises(ClusterFileError, match=r"^missing\.yaml: cannot read"):
        load_cluster(tmp_path / "missing.yaml")
