import pytest
import torch

from galfast.train.optimizers import make_optimizer


def _params(seed: int) -> list[torch.nn.Parameter]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(50, 7, generator=gen)) for _ in range(3)]


def _train(optimizer, params, steps: int = 3) -> None:
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen)
        optimizer.step()


@pytest.mark.parametrize("name", ["adam", "adamw"])
def test_adam_on_cpu_takes_the_fused_step_with_the_same_result(name):
    ours, plain = _params(0), _params(0)
    optimizer = make_optimizer(name, ours, lr=0.01)
    assert optimizer.param_groups[0]["fused"] is True
    _train(optimizer, ours)
    reference = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[name]
    _train(reference(plain, lr=0.01), plain)
    for a, b in zip(ours, plain):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_a_factory_is_called_as_given():
    params = _params(2)
    optimizer = make_optimizer(lambda ps, lr: torch.optim.Adam(ps, lr=lr), params, lr=0.1)
    assert not optimizer.param_groups[0]["fused"]
