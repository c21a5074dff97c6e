"""Optimiser steps, in place on float32 device arrays (``cu/optim.cu``):
``sgd_momentum``, ``adam`` and ``adamw``, with the arithmetic of PyTorch's
``torch.optim.SGD``, ``Adam`` and ``AdamW`` (one step; the caller keeps the
state buffers and the step count).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ArgumentValueError, KernelArgumentError
from ..runtime.session import backend as active_backend
from .library import KernelSpec, check_dtype, grid_1d, module, register

FAMILY = "optim"
_BLOCK = 256


def _arrays(name: str, arrays: dict) -> int:
    """Check that every array is a float32 device array of the parameter's
    shape; return the number of elements."""
    check_dtype(name, arrays, ("float32",))
    shape = tuple(arrays["param"].shape)
    for what, a in arrays.items():
        if tuple(a.shape) != shape:
            raise KernelArgumentError(f"wb.kernels.{name}(): {what} has shape {tuple(a.shape)} but "
                                      f"param has shape {shape}; every state buffer has the "
                                      f"parameter's shape.")
    return int(arrays["param"].size)


def _non_negative(name: str, **values) -> None:
    for what, value in values.items():
        if not (isinstance(value, (int, float, np.floating, np.integer)) and math.isfinite(value)
                and value >= 0):
            raise ArgumentValueError(
                f"wb.kernels.{name}(): {what} must be a finite number >= 0, got {value!r}.")


def sgd_momentum(param, grad, momentum_buffer, lr: float, momentum: float = 0.9,
                 weight_decay: float = 0.0, nesterov: bool = False, dampening: float = 0.0):
    """One SGD step with momentum, in place: ``g = grad + weight_decay *
    param``, ``buf = momentum * buf + (1 - dampening) * g``, ``param -= lr *
    (g + momentum * buf if nesterov else buf)``. Start ``momentum_buffer`` at
    zeros. Returns ``param``."""
    name = "sgd_momentum"
    n = _arrays(name, {"param": param, "grad": grad, "momentum_buffer": momentum_buffer})
    _non_negative(name, lr=lr, momentum=momentum, weight_decay=weight_decay, dampening=dampening)
    if nesterov and (momentum <= 0 or dampening != 0):
        raise ArgumentValueError(
            f"wb.kernels.{name}(): Nesterov momentum needs momentum > 0 and "
            f"dampening = 0, got momentum={momentum!r}, dampening={dampening!r}.")
    if n:
        module(FAMILY)["sgd_momentum_step"](
            param, grad, momentum_buffer, n, float(lr), float(momentum), float(dampening),
            float(weight_decay), int(bool(nesterov)),
            grid=grid_1d(n, _BLOCK, per_thread=4, blocks_per_sm=8), block=_BLOCK)
    return param


def _adam(name, param, grad, exp_avg, exp_avg_sq, step, lr, betas, eps, weight_decay, decoupled):
    n = _arrays(name, {"param": param, "grad": grad, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq})
    if not isinstance(step, (int, np.integer)) or isinstance(step, bool) or step < 1:
        raise ArgumentValueError(
            f"wb.kernels.{name}(): step is the number of this step, counting from 1; "
            f"got {step!r}.")
    beta1, beta2 = betas
    _non_negative(name, lr=lr, eps=eps, weight_decay=weight_decay, beta1=beta1, beta2=beta2)
    if beta1 >= 1 or beta2 >= 1:
        raise ArgumentValueError(f"wb.kernels.{name}(): betas must be in [0, 1), got {betas!r}.")
    if n:
        step_size = lr / (1.0 - beta1 ** int(step))
        sqrt_correction2 = math.sqrt(1.0 - beta2 ** int(step))
        module(FAMILY)["adam_step"](
            param, grad, exp_avg, exp_avg_sq, n, float(step_size), float(sqrt_correction2),
            float(beta1), float(beta2), float(eps), float(lr), float(weight_decay), int(decoupled),
            grid=grid_1d(n, _BLOCK, per_thread=4, blocks_per_sm=8), block=_BLOCK)
    return param


def adam(param, grad, exp_avg, exp_avg_sq, step: int, lr: float = 1e-3, betas=(0.9, 0.999),
         eps: float = 1e-8, weight_decay: float = 0.0):
    """One Adam step, in place (``step`` counts from 1; ``exp_avg`` and
    ``exp_avg_sq`` start at zeros): weight decay added to the gradient (L2).
    Returns ``param``."""
    return _adam("adam", param, grad, exp_avg, exp_avg_sq, step, lr, betas, eps, weight_decay, 0)


def adamw(param, grad, exp_avg, exp_avg_sq, step: int, lr: float = 1e-3, betas=(0.9, 0.999),
          eps: float = 1e-8, weight_decay: float = 1e-2):
    """One AdamW step, in place: decoupled weight decay (``param *= 1 - lr *
    weight_decay``) then Adam's update. Returns ``param``."""
    return _adam("adamw", param, grad, exp_avg, exp_avg_sq, step, lr, betas, eps, weight_decay, 1)


# -- references: float64 NumPy, new arrays (the inputs are not changed) --------

def sgd_momentum_reference(param, grad, momentum_buffer, lr, momentum=0.9, weight_decay=0.0,
                           nesterov=False, dampening=0.0):
    """The parameters after one SGD step (the buffer after it: see
    :func:`sgd_momentum_state_reference`)."""
    return _sgd(param, grad, momentum_buffer, lr, momentum, weight_decay, nesterov, dampening)[0]


def sgd_momentum_state_reference(param, grad, momentum_buffer, lr, momentum=0.9,
                                 weight_decay=0.0, nesterov=False, dampening=0.0):
    """``(param, momentum_buffer)`` after one SGD step."""
    return _sgd(param, grad, momentum_buffer, lr, momentum, weight_decay, nesterov, dampening)


def _sgd(param, grad, buf, lr, momentum, weight_decay, nesterov, dampening):
    p, g, b = (np.asarray(a, np.float64) for a in (param, grad, buf))
    g = g + weight_decay * p
    b = momentum * b + (1 - dampening) * g
    p = p - lr * (g + momentum * b if nesterov else b)
    return p.astype(np.float32), b.astype(np.float32)


def adam_reference(param, grad, exp_avg, exp_avg_sq, step, lr=1e-3, betas=(0.9, 0.999),
                   eps=1e-8, weight_decay=0.0):
    """The parameters after one Adam step."""
    return adam_state_reference(param, grad, exp_avg, exp_avg_sq, step, lr, betas, eps,
                                weight_decay, False)[0]


def adamw_reference(param, grad, exp_avg, exp_avg_sq, step, lr=1e-3, betas=(0.9, 0.999),
                    eps=1e-8, weight_decay=1e-2):
    """The parameters after one AdamW step."""
    return adam_state_reference(param, grad, exp_avg, exp_avg_sq, step, lr, betas, eps,
                                weight_decay, True)[0]


def adam_state_reference(param, grad, exp_avg, exp_avg_sq, step, lr, betas, eps, weight_decay,
                         decoupled):
    """``(param, exp_avg, exp_avg_sq)`` after one Adam (or AdamW) step."""
    p, g, m, v = (np.asarray(a, np.float64) for a in (param, grad, exp_avg, exp_avg_sq))
    beta1, beta2 = betas
    if decoupled:
        p = p * (1 - lr * weight_decay)
    else:
        g = g + weight_decay * p
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    p = p - lr / (1 - beta1 ** step) * m / (np.sqrt(v) / math.sqrt(1 - beta2 ** step) + eps)
    return p.astype(np.float32), m.astype(np.float32), v.astype(np.float32)


def _sgd_momentum_library(param, grad, momentum_buffer, lr, momentum=0.9, weight_decay=0.0,
                          nesterov=False, dampening=0.0):
    """The same step through the backend's array operations (one pass per operation)."""
    g = grad + weight_decay * param
    momentum_buffer *= momentum
    momentum_buffer += (1 - dampening) * g
    param -= lr * (g + momentum * momentum_buffer if nesterov else momentum_buffer)
    return param


def _adam_library(param, grad, exp_avg, exp_avg_sq, step, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                  weight_decay=0.0, decoupled=False):
    """Adam (or AdamW) through the backend's array operations."""
    xp = active_backend().xp
    beta1, beta2 = betas
    if decoupled:
        param *= 1 - lr * weight_decay
        g = grad
    else:
        g = grad + weight_decay * param
    exp_avg *= beta1
    exp_avg += (1 - beta1) * g
    exp_avg_sq *= beta2
    exp_avg_sq += (1 - beta2) * g * g
    denominator = xp.sqrt(exp_avg_sq) / math.sqrt(1 - beta2 ** step) + eps
    param -= (lr / (1 - beta1 ** step)) * exp_avg / denominator
    return param


def _adamw_library(param, grad, exp_avg, exp_avg_sq, step, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                   weight_decay=1e-2):
    return _adam_library(param, grad, exp_avg, exp_avg_sq, step, lr, betas, eps, weight_decay, True)


def _state(size: int, rng, buffers: int):
    n = max(size, 0)
    param = rng.standard_normal(n, dtype=np.float32)
    grad = rng.standard_normal(n, dtype=np.float32)
    state = [rng.standard_normal(n, dtype=np.float32) * np.float32(0.1) for _ in range(buffers)]
    if buffers == 2:
        np.abs(state[1], out=state[1])   # the second moment is >= 0
    return param, grad, state


def _sgd_example(size: int, dtype, rng):
    param, grad, (buf,) = _state(size, rng, 1)
    return (param, grad, buf, 0.01, 0.9, 1e-4, True), param.size


def _adam_example(size: int, dtype, rng):
    param, grad, (m, v) = _state(size, rng, 2)
    return (param, grad, m, v, 3, 1e-3, (0.9, 0.999), 1e-8, 1e-2), param.size


register(KernelSpec(
    name="sgd_momentum", family=FAMILY, dtypes=("float32",),
    bytes_per_element=4 * 5, flops_per_element=7.0,
    description="SGD step with momentum, in place: optional weight decay, dampening and "
                "Nesterov momentum (PyTorch's SGD).",
    function=sgd_momentum, reference=sgd_momentum_reference,
    library_equivalent=_sgd_momentum_library, example=_sgd_example))

register(KernelSpec(
    name="adam", family=FAMILY, dtypes=("float32",),
    bytes_per_element=4 * 7, flops_per_element=14.0,
    description="Adam step, in place: moments updated, bias-corrected update, weight decay "
                "added to the gradient (PyTorch's Adam).",
    function=adam, reference=adam_reference, library_equivalent=_adam_library,
    example=_adam_example))

register(KernelSpec(
    name="adamw", family=FAMILY, dtypes=("float32",),
    bytes_per_element=4 * 7, flops_per_element=15.0,
    description="AdamW step, in place: decoupled weight decay, then Adam's update "
                "(PyTorch's AdamW).",
    function=adamw, reference=adamw_reference, library_equivalent=_adamw_library,
    example=_adam_example))
