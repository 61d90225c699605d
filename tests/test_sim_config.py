"""SimConfig validation: every field is checked, and a bad value names its field."""
from __future__ import annotations

import math

import pytest

from clustergym.core.config import SimConfig, SimConfigError

BAD = [
    ("overload_threshold", 5.0), ("overload_threshold", math.nan), ("overload_threshold", 0.0),
    ("overload_threshold", -0.5), ("cluster_overload_threshold", 1.5), ("cluster_overload_threshold", 0.0),
    ("tick_s", 0.0), ("tick_s", math.inf), ("tick_s", "60"), ("usage_change_mean_s", -1.0),
    ("usage_sigma", -0.1), ("usage_min", 0.0), ("usage_max", math.nan), ("migration_base_s", -5.0),
    ("suspend_s", -1.0), ("resume_base_s", math.inf), ("resume_per_gpu_s", -1.0), ("overload_recheck_s", -1.0),
    ("contention_step", -0.05), ("gang_timeout_s", 0.0), ("horizon_s", 0.0), ("horizon_s", math.nan),
    ("decide_on", "sometimes"), ("record_series", 1), ("overload_threshold", True),
    ("optstop_error_sigma", -0.1), ("optstop_error_sigma", math.inf), ("optstop_error_sigma", math.nan),
]


@pytest.mark.parametrize("field, value", BAD)
def test_bad_field_raises_a_named_error(field, value):
    with pytest.raises(SimConfigError, match=f"SimConfig.{field} ") as e:
        SimConfig(**{field: value})
    assert e.value.field == field and isinstance(e.value, ValueError)


def test_usage_bounds_must_be_ordered():
    with pytest.raises(SimConfigError, match="usage_max must be >= usage_min") as e:
        SimConfig(usage_min=1.2, usage_max=1.1)
    assert e.value.field == "usage_max"
    SimConfig(usage_min=1.0, usage_max=1.0)  # a constant factor is allowed


def test_limits_that_are_allowed():
    SimConfig(overload_threshold=1.0, cluster_overload_threshold=1.0, usage_change_mean_s=0.0, usage_sigma=0.0,
              contention_step=0.0, migration_base_s=0.0, suspend_s=0.0, resume_base_s=0.0, resume_per_gpu_s=0.0,
              overload_recheck_s=0.0, gang_timeout_s=math.inf, horizon_s=math.inf, tick_s=1,
              optstop_error_sigma=0.0)


def test_every_numeric_field_is_checked():
    from dataclasses import fields

    from clustergym.core.config import _RANGES

    checked = [n for names, _ in _RANGES for n in names]
    assert sorted(checked) == sorted(f.name for f in fields(SimConfig) if f.type == "float")
