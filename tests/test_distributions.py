"""The pairwise policies' action distributions (agents/distributions.py) are SB3's, normalised with log_softmax:
the same probabilities, log-probabilities and masked entropy up to rounding, masked actions at probability 0."""
from __future__ import annotations

import numpy as np
import pytest
import torch as th
from sb3_contrib.common.maskable.distributions import MaskableCategorical
from torch.distributions import Categorical

from clustergym.agents.distributions import SoftmaxCategorical, SoftmaxMaskableCategorical


def _logits_and_mask(seed: int = 0) -> tuple[th.Tensor, th.Tensor]:
    g = th.Generator().manual_seed(seed)
    logits = th.randn(16, 300, generator=g) * 3
    mask = th.rand(16, 300, generator=g) < 0.05
    mask[:, 0] = True
    return th.where(mask, logits, th.full_like(logits, -1e8)), mask


def test_masked_distribution_matches_sb3_contrib():
    logits, mask = _logits_and_mask()
    ours, theirs = SoftmaxMaskableCategorical(logits=logits, masks=mask), MaskableCategorical(logits=logits, masks=mask)
    actions = th.multinomial(mask.float(), 1).squeeze(-1)
    th.testing.assert_close(ours.probs, theirs.probs, rtol=1e-5, atol=1e-7)
    th.testing.assert_close(ours.log_prob(actions), theirs.log_prob(actions), rtol=1e-5, atol=1e-5)
    th.testing.assert_close(ours.entropy(), theirs.entropy(), rtol=1e-5, atol=1e-5)
    assert (ours.probs[~mask] == 0).all() and th.allclose(ours.probs.sum(-1), th.ones(16))
    assert mask.gather(1, ours.sample((50,)).T).all()  # samples only valid actions
    ours.apply_masking(None)  # masks removed: the original logits again
    th.testing.assert_close(ours.logits, th.log_softmax(logits, -1))


def test_plain_distribution_matches_torch_and_keeps_its_errors():
    logits, _ = _logits_and_mask(1)
    th.testing.assert_close(SoftmaxCategorical(logits=logits).logits, Categorical(logits=logits).logits,
                            rtol=1e-5, atol=1e-4)
    probs = th.tensor([[0.2, 0.8]])
    assert th.equal(SoftmaxCategorical(probs=probs).probs, Categorical(probs=probs).probs)
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        SoftmaxCategorical(probs=probs, logits=probs)
    with pytest.raises(ValueError, match="one-dimensional"):
        SoftmaxCategorical(logits=th.tensor(1.0))


def test_gradients_match_the_logsumexp_normalisation():
    logits, mask = _logits_and_mask(2)
    actions = th.multinomial(mask.float(), 1).squeeze(-1)
    grads = []
    for cls in (SoftmaxMaskableCategorical, MaskableCategorical):
        x = logits.clone().requires_grad_()
        d = cls(logits=x, masks=mask)
        (d.log_prob(actions).sum() + 0.01 * d.entropy().sum()).backward()
        grads.append(x.grad)
    th.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-6)
    assert np.isfinite(grads[0].numpy()).all()


def test_one_sample_per_state_follows_the_probabilities_and_never_draws_a_masked_action():
    logits, mask = _logits_and_mask(3)
    d = SoftmaxMaskableCategorical(logits=logits[:4], masks=mask[:4])
    th.manual_seed(0)
    n = 40_000
    draws = th.stack([d.sample() for _ in range(n)])  # (n, 4): one action per state and draw
    assert draws.shape == (n, 4) and mask[:4].gather(1, draws.T).all()
    for state in range(4):
        freq = th.bincount(draws[:, state], minlength=300).double() / n
        p = d.probs[state].double()
        sd = (p * (1 - p) / n).sqrt()
        assert ((freq - p).abs() <= 5 * sd + 1e-9).all(), state  # each action within 5 standard errors
    th.manual_seed(0)
    again = th.stack([d.sample() for _ in range(5)])
    assert th.equal(again, draws[:5])  # seeded: the same draws again
    last = th.zeros(2, 5)
    last[:, -1] = -1e8  # the last action masked: never drawn, even for a uniform draw near 1
    d = SoftmaxMaskableCategorical(logits=last, masks=th.tensor([[True] * 4 + [False]] * 2))
    assert (th.stack([d.sample() for _ in range(2_000)]) < 4).all()


def test_the_masked_distribution_normalises_once_per_forward_pass_and_still_serves_unmasked_use(monkeypatch):
    """MaskablePPO builds the distribution, then masks it: the logits are normalised once, after masking. Read
    without masks, the distribution is built from the logits as given."""
    from clustergym.agents.distributions import SoftmaxMaskableCategoricalDistribution

    logits, mask = _logits_and_mask(4)
    calls = []
    real = th.log_softmax
    monkeypatch.setattr(th, "log_softmax", lambda *a, **k: calls.append(1) or real(*a, **k))
    dist = SoftmaxMaskableCategoricalDistribution(300).proba_distribution(logits)
    dist.apply_masking(mask)
    assert len(calls) == 1
    assert (dist.distribution.probs[~mask] == 0).all()
    th.testing.assert_close(dist.log_prob(dist.mode()), MaskableCategorical(logits=logits, masks=mask).log_prob(
        dist.mode()), rtol=1e-5, atol=1e-5)
    plain = SoftmaxMaskableCategoricalDistribution(300).proba_distribution(logits)
    th.testing.assert_close(plain.distribution.probs, th.softmax(logits, -1))  # built on first use, no masks
