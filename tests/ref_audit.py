"""Plain references for the audit's attacker training: the loops as first written (torch's
per-tensor Adam, one gather per mini-batch), against which the faster loops must agree bitwise."""

import torch

from galfast.audit.attackers import _build
from galfast.audit.search import FittedHead, _class_weights, _loss, primary_score
from galfast.gal.adversary_losses import tv_loss
from galfast.gal.seeding import seeded_generator
from galfast.models.attacker import AttackerMLP


def ref_fit_head(config, kind, num_outputs, x_fit, y_fit, x_val, y_val, *, seed, search):
    """galfast.audit.search.fit_head, step by step."""
    mean, std = x_fit.mean(0), x_fit.std(0, unbiased=False).clamp_min(1e-12)
    xf, xv = (x_fit - mean) / std, (x_val - mean) / std
    y_mean = y_std = None
    yf, yv = y_fit, y_val
    if kind == "continuous":
        y_mean, y_std = y_fit.mean(0), y_fit.std(0, unbiased=False).clamp_min(1e-12)
        yf, yv = (y_fit - y_mean) / y_std, (y_val - y_mean) / y_std
    weights = _class_weights(kind, y_fit, num_outputs) if config.balanced else None
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(seed)
        model = AttackerMLP(xf.size(1), num_outputs, (config.width,) * config.depth).to(xf.dtype)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    gen = seeded_generator(seed)
    n = xf.size(0)
    best_loss, best_state, since, epochs = float("inf"), None, 0, 0
    while epochs < search.max_epochs:
        epochs += 1
        model.train()
        order = torch.randperm(n, generator=gen)
        for start in range(0, n, search.batch_size):
            idx = order[start : start + search.batch_size]
            loss = _loss(model(xf[idx]), yf[idx], kind, weights)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            val_loss = float(_loss(model(xv), yv, kind, weights))
        if val_loss < best_loss:
            best_loss, since = val_loss, 0
            best_state = {k: v.clone() for k, v in model.state_dict().items()}
        else:
            since += 1
            if since >= search.patience:
                break
    model.load_state_dict(best_state)
    model.eval()
    fitted = FittedHead(model, mean, std, y_mean, y_std, kind, 0.0, epochs)
    pred, scores = fitted.predict(x_val)
    fitted.val_score = primary_score(kind, y_val, pred, scores)
    return fitted


def ref_fit_and_predict(family, kind, num_outputs, x_train, y_train, x_test, *, seed, config):
    """galfast.audit.attackers.fit_and_predict, step by step: (outputs on x_test, model)."""
    mean, std = x_train.mean(0), x_train.std(0, unbiased=False).clamp_min(1e-12)
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
    if kind == "continuous":
        y_mean, y_std = y_train.mean(0), y_train.std(0, unbiased=False).clamp_min(1e-12)
        y_train = (y_train - y_mean) / y_std
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(seed)
        model = _build(family, x_train.size(1), num_outputs, config.hidden)
    model = model.to(x_train.dtype)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    gen = seeded_generator(seed)
    n = x_train.size(0)
    model.train()
    batches_per_epoch = -(-n // config.batch_size)
    epochs = max(config.epochs, -(-config.min_steps // batches_per_epoch))
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen)
        for start in range(0, n, config.batch_size):
            idx = order[start : start + config.batch_size]
            loss = tv_loss(model(x_train[idx]), y_train[idx], kind)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.eval()
    with torch.no_grad():
        return model(x_test), model
