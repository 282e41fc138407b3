"""Non-negative least squares (Lawson and Hanson's active set), for the fitted models' coefficients."""

from __future__ import annotations

import numpy as np


def nnls(a: np.ndarray, b: np.ndarray, tol: float = 1e-10) -> np.ndarray:
    """min ‖a·x − b‖ with x ≥ 0 (Lawson and Hanson's active set): every cost in the form is non-negative, so a noisy
    point cannot buy a better fit with a negative per-layer cost that makes small models' times negative."""
    n = a.shape[1]
    free = np.zeros(n, dtype=bool)
    x = np.zeros(n)
    for _ in range(3 * n):
        grad = a.T @ (b - a @ x)
        if free.all() or grad[~free].max() <= tol:
            break
        free[np.argmax(np.where(free, -np.inf, grad))] = True
        while True:
            z = np.zeros(n)
            z[free] = np.linalg.lstsq(a[:, free], b, rcond=None)[0]
            if (z[free] > tol).all():
                break
            neg = free & (z <= tol)
            step = np.min(x[neg] / np.maximum(x[neg] - z[neg], 1e-300))
            x = x + step * (z - x)
            free &= x > tol
            x[~free] = 0.0
        x = z
    return x
