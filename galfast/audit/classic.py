"""Non-neural attackers that are strong on small tabular inputs without a training budget to
tune: k-nearest neighbours and histogram gradient-boosted trees (scikit-learn).

Both see the attacker's training nodes only: k is chosen on the validation split carved from
them, and the trees stop early on that same split.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

__all__ = ["CLASSIC_FAMILIES", "SKLEARN_MODULES", "fit_classic", "supports"]

CLASSIC_FAMILIES = ("knn", "hgb")
# What fit_classic imports (see galfast.audit.threads.attacker_threads' load_first).
SKLEARN_MODULES = ("sklearn.ensemble", "sklearn.neighbors")
_KS = (5, 15, 45)


def supports(family: str, kind: str, num_outputs: int) -> bool:
    """Whether ``family`` handles the attribute: the trees take one target column."""
    if family == "hgb":
        return kind in ("binary", "categorical") or (kind == "continuous" and num_outputs == 1)
    return True


def _standardise(x_fit: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    # A constant column's std of 0 divides by 1; a tiny one is kept (a floor of 1e-12 hid
    # columns of spread 1e-13 from the attackers).
    std = x_fit.std(0)
    mean, std = x_fit.mean(0), np.where(std > 0, std, 1)
    return [(a - mean) / std for a in (x_fit, *others)]


def _scores(model, x: np.ndarray, kind: str) -> Optional[np.ndarray]:
    if kind != "binary":
        return None
    classes = list(model.classes_)
    if 1 not in classes:  # a training split without positives scores every row 0
        return np.zeros(len(x))
    return model.predict_proba(x)[:, classes.index(1)]


def fit_classic(
    family: str,
    kind: str,
    x_fit: np.ndarray,
    y_fit: np.ndarray,
    x_val: np.ndarray,
    y_val: np.ndarray,
    x_test: np.ndarray,
    *,
    seed: int,
    score,
) -> tuple[np.ndarray, Optional[np.ndarray], dict[str, Any]]:
    """Fits ``family`` (``"knn"`` or ``"hgb"``) and predicts the test rows; returns
    ``(pred, binary scores, chosen configuration with its validation score)``. ``score(y,
    pred)`` is the primary metric (larger = stronger) used to choose on validation."""
    # scikit-learn loads with the first fit, not with the package (about a second).
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

    xf, xv, xt = _standardise(x_fit, x_val, x_test)
    regress = kind == "continuous"
    if family == "knn":
        best = None
        for k in _KS:
            k = min(k, len(xf))
            cls = KNeighborsRegressor if regress else KNeighborsClassifier
            model = cls(n_neighbors=k, weights="distance").fit(xf, y_fit)
            val = score(y_val, model.predict(xv))
            if best is None or val > best[0]:
                best = (val, k)
        val, k = best
        # Refit on every training row (fit and validation) with the chosen k.
        cls = KNeighborsRegressor if regress else KNeighborsClassifier
        model = cls(n_neighbors=k, weights="distance").fit(
            np.concatenate([xf, xv]), np.concatenate([y_fit, y_val])
        )
        config = {"n_neighbors": k, "weights": "distance"}
    else:
        # Coarse bins, small trees and a fast rate: about a tenth of the default's cost on
        # a MovieLens-sized split for a point or two of validation accuracy.
        options: dict[str, Any] = dict(
            max_iter=100,
            learning_rate=0.2,
            max_leaf_nodes=15,
            max_bins=63,
            early_stopping=True,
            n_iter_no_change=5,
        )
        if regress:
            model = HistGradientBoostingRegressor(random_state=seed, **options)
            y_fit, y_val = y_fit.reshape(-1), y_val.reshape(-1)
        else:
            # Balanced class weights: the primary metric is macro-F1.
            options["class_weight"] = "balanced"
            model = HistGradientBoostingClassifier(random_state=seed, **options)
        # Early stopping scores the validation rows of the classes the fit rows hold: a class
        # only in validation (a rare one) made scikit-learn refuse them ("unseen labels").
        seen = np.ones(len(y_val), dtype=bool) if regress else np.isin(y_val, y_fit)
        if seen.any():
            model.fit(xf, y_fit, X_val=xv[seen], y_val=y_val[seen])
        else:  # nothing to stop on: the full max_iter rounds
            options["early_stopping"] = False
            model.set_params(early_stopping=False).fit(xf, y_fit)
        val = score(y_val, model.predict(xv))
        config = {**options, "iterations": int(model.n_iter_)}
    pred = model.predict(xt)
    if regress:
        pred = pred.reshape(len(xt), -1)
    return pred, _scores(model, xt, kind), {**config, "val_score": float(val)}
