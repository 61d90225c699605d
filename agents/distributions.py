"""Action distributions of the pairwise policies: SB3's categorical distributions (masked and plain), normalised
with ``log_softmax`` instead of torch's ``logits - logsumexp(logits)``.

The two are the same function up to rounding. The reason is speed: on the CPU, torch's ``logsumexp`` and its
backward take a slow path for arguments whose exponential underflows, and a masked action's logit is -1e8.
Measured with torch 2.13 on the development machine (one thread, 256 x 1,537 logits, all but 100 per row at
-1e8): forward and backward of ``x - x.logsumexp(-1)`` 14.8 ms, of ``log_softmax(x)`` 2.6 ms. PPO's update
builds the distribution three times per minibatch, so this was about a quarter of the update's time.

Sampling is by the inverse of the cumulative distribution (one uniform number per state), not torch's
``multinomial``: the same distribution, drawn from the seeded torch generator as before, but a different stream
of actions. The reason is again speed: ``multinomial`` draws one exponential number per action, 1.85 ms for
32 x 1,537 probabilities against 0.08 ms (torch 2.13, one thread), a quarter of a rollout's forward pass.
"""
from __future__ import annotations

import torch as th
from sb3_contrib.common.maskable.distributions import MaskableCategorical, MaskableCategoricalDistribution
from stable_baselines3.common.distributions import CategoricalDistribution
from torch.distributions import Categorical, Distribution


class SoftmaxCategorical(Categorical):
    """A :class:`torch.distributions.Categorical` whose logits are normalised with ``log_softmax``."""

    def __init__(self, probs: th.Tensor | None = None, logits: th.Tensor | None = None,
                 validate_args: bool | None = None) -> None:
        if probs is not None or logits is None or logits.dim() < 1:
            super().__init__(probs, logits, validate_args)  # probabilities, or torch's own error
            return
        self.logits = th.log_softmax(logits, dim=-1)
        self._param = self.logits
        self._num_events = self._param.size()[-1]
        batch_shape = self._param.size()[:-1] if self._param.ndimension() > 1 else th.Size()
        Distribution.__init__(self, batch_shape, validate_args=validate_args)

    def sample(self, sample_shape: th.Size = th.Size()) -> th.Tensor:
        """One action per state by inverse-CDF sampling: the first action whose cumulative probability exceeds
        u x total, u uniform in [0, 1). An action of probability 0 (masked) is never drawn: its cumulative
        probability equals its predecessor's. Other sample shapes take torch's sampler."""
        if tuple(sample_shape):
            return super().sample(sample_shape)
        with th.no_grad():
            cdf = self.probs.cumsum(-1)
            total = cdf[..., -1:].contiguous()
            u = th.rand(total.shape, dtype=cdf.dtype, device=cdf.device) * total
            drawn = th.searchsorted(cdf, u, right=True)
            last = th.searchsorted(cdf, total, right=False)  # the last action of positive probability
            return th.minimum(drawn, last).squeeze(-1)


class SoftmaxMaskableCategorical(MaskableCategorical, SoftmaxCategorical):
    """sb3-contrib's :class:`MaskableCategorical` (masking, masked entropy) on :class:`SoftmaxCategorical`'s
    normalisation. The logits it is built with are kept as given and normalised once, after masking (sb3-contrib
    normalises them, masks the normalised logits and normalises again): the same distribution up to rounding."""

    def __init__(self, probs: th.Tensor | None = None, logits: th.Tensor | None = None,
                 validate_args: bool | None = None, masks: th.Tensor | None = None) -> None:
        self.masks = None
        if probs is not None or logits is None or logits.dim() < 1:
            SoftmaxCategorical.__init__(self, probs, logits, validate_args)  # probabilities, or torch's own error
            self._original_logits = self.logits
            if masks is not None:
                self.apply_masking(masks)
            return
        self._original_logits = logits
        self._validate_args = Distribution._validate_args if validate_args is None else bool(validate_args)
        self.apply_masking(masks)

    def apply_masking(self, masks: th.Tensor | None) -> None:
        """sb3-contrib's masking (masked logits -1e8; ``None`` restores the logits the distribution was built
        with), from the logits as built: it reads the device and shape from ``self.logits``, which a distribution
        built with masks does not have before its first normalisation."""
        self.logits = self._original_logits
        super().apply_masking(masks)


class SoftmaxMaskableCategoricalDistribution(MaskableCategoricalDistribution):
    """MaskablePPO's action distribution, building :class:`SoftmaxMaskableCategorical` when first used: masked
    at once when :meth:`apply_masking` comes first (MaskablePPO's forward, ``evaluate_actions`` and
    ``get_distribution`` with masks), so the logits are normalised once per forward pass."""

    def __init__(self, action_dim: int) -> None:
        self._logits: th.Tensor | None = None  # the logits of proba_distribution, not built into a distribution yet
        self._built: SoftmaxMaskableCategorical | None = None
        super().__init__(action_dim)

    @property
    def distribution(self) -> SoftmaxMaskableCategorical | None:
        if self._built is None and self._logits is not None:
            self._built, self._logits = SoftmaxMaskableCategorical(logits=self._logits), None
        return self._built

    @distribution.setter
    def distribution(self, value: SoftmaxMaskableCategorical | None) -> None:
        self._built, self._logits = value, None

    def proba_distribution(self, action_logits: th.Tensor) -> SoftmaxMaskableCategoricalDistribution:
        self._built, self._logits = None, action_logits.view(-1, self.action_dim)
        return self

    def apply_masking(self, masks: th.Tensor | None) -> None:
        if self._built is None and self._logits is not None:
            self.distribution = SoftmaxMaskableCategorical(logits=self._logits, masks=masks)
        else:
            self.distribution.apply_masking(masks)


class SoftmaxCategoricalDistribution(CategoricalDistribution):
    """Plain PPO's action distribution, building :class:`SoftmaxCategorical`."""

    def proba_distribution(self, action_logits: th.Tensor) -> SoftmaxCategoricalDistribution:
        self.distribution = SoftmaxCategorical(logits=action_logits)
        return self
