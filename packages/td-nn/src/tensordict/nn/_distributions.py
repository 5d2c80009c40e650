"""Distributions used by the probabilistic modules: ``Delta``, ``OneHotCategorical``,
``TruncatedNormal`` and ``CompositeDistribution`` (a distribution over several keys of a
TensorDict whose ``sample`` / ``log_prob`` / ``entropy`` read and write TensorDicts)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import Enum
from typing import Any

import torch
from torch import distributions as D  # noqa: N812
from torch.distributions import constraints

from tensordict import NestedKey, TensorDict, TensorDictBase
from tensordict.ext import unravel_key  # the strict one: raises on a tuple that is no key
from tensordict.nn._common import _ReadableKeyError
from tensordict.utils import ModeSwitch

__all__ = [
    "CompositeDistribution",
    "Delta",
    "OneHotCategorical",
    "ReparamGradientStrategy",
    "TruncatedNormal",
    "TruncatedStandardNormal",
    "composite_lp_aggregate",
    "rand_one_hot",
    "set_composite_lp_aggregate",
]


class Delta(D.Distribution):
    """A Dirac distribution at ``param``: sampling returns ``param``.

    The default distribution of :class:`~tensordict.nn.ProbabilisticTensorDictModule`,
    which then writes its input unchanged (a deterministic module).

    Args:
        param (Tensor): the location, ``[*batch_shape, *event_shape]``.
        atol (float, optional): absolute tolerance of ``log_prob``. Defaults to ``1e-6``.
        rtol (float, optional): relative tolerance of ``log_prob``. Defaults to ``1e-6``.
        batch_shape (torch.Size, optional): defaults to ``param.shape[:-1]``.
        event_shape (torch.Size, optional): defaults to ``param.shape[-1:]``.

    Examples:
        >>> import torch
        >>> d = Delta(torch.ones(3, 2))
        >>> d.sample().shape, d.log_prob(torch.ones(3, 2))
        (torch.Size([3, 2]), tensor([inf, inf, inf]))
    """

    arg_constraints: dict = {}
    has_rsample = True

    def __init__(
        self,
        param: torch.Tensor,
        atol: float = 1e-6,
        rtol: float = 1e-6,
        batch_shape: torch.Size | None = None,
        event_shape: torch.Size | None = None,
    ) -> None:
        self.param = param
        self.atol = atol
        self.rtol = rtol
        if batch_shape is None and event_shape is None:
            batch_shape = param.shape[:-1] if param.ndim else torch.Size()
            event_shape = param.shape[-1:] if param.ndim else torch.Size()
        elif batch_shape is None:
            batch_shape = param.shape[: param.ndim - len(event_shape)]  # type: ignore[arg-type]
        elif event_shape is None:
            event_shape = param.shape[len(batch_shape) :]
        super().__init__(torch.Size(batch_shape), torch.Size(event_shape), validate_args=False)  # type: ignore[arg-type]

    def expand(self, batch_shape: torch.Size, _instance: Any = None) -> Delta:  # type: ignore[override]  # noqa: D102
        shape = torch.Size(batch_shape) + self.event_shape
        return Delta(self.param.expand(shape), self.atol, self.rtol, torch.Size(batch_shape), self.event_shape)

    def rsample(self, sample_shape: torch.Size | tuple = ()) -> torch.Tensor:  # type: ignore[override]  # noqa: D102
        return self.param.expand(torch.Size(sample_shape) + self.param.shape)

    def sample(self, sample_shape: torch.Size | tuple = ()) -> torch.Tensor:  # type: ignore[override]  # noqa: D102
        with torch.no_grad():
            return self.rsample(sample_shape)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:  # noqa: D102
        close = (value - self.param).abs() <= self.atol + self.rtol * self.param.abs()
        if self.event_shape:
            close = close.flatten(-len(self.event_shape)).all(-1)
        # tensordict 0.15: a point mass has an infinite density at ``param``
        inf = torch.full((), math.inf, dtype=self.param.dtype, device=self.param.device)
        return torch.where(close, inf, -inf)

    @property
    def mode(self) -> torch.Tensor:  # noqa: D102
        return self.param

    @property
    def mean(self) -> torch.Tensor:  # noqa: D102
        return self.param

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """The location (same as ``mode``)."""
        return self.param


class ReparamGradientStrategy(Enum):
    """How :meth:`OneHotCategorical.rsample` passes gradients through a discrete sample."""

    PassThrough = "pass_through"
    RelaxedOneHot = "relaxed_one_hot"


class OneHotCategorical(D.OneHotCategorical):
    """One-hot categorical distribution with a ``mode``, a ``deterministic_sample`` and a
    reparameterised (straight-through) ``rsample``.

    Args:
        logits (Tensor, optional): event log-probabilities, ``[*B, K]``.
        probs (Tensor, optional): event probabilities, ``[*B, K]``.
        grad_method (ReparamGradientStrategy, optional): ``PassThrough`` (default):
            the sample's gradient is that of ``probs``; ``RelaxedOneHot``: a relaxed
            (Gumbel-softmax, temperature 1) sample made one-hot in the forward pass.

    Examples:
        >>> import torch
        >>> d = OneHotCategorical(logits=torch.tensor([0.0, 5.0, 0.0]))
        >>> d.mode
        tensor([0, 1, 0])
    """

    # tensordict 0.15: ``rsample`` exists but is not advertised, so a probabilistic module
    # under ``InteractionType.RANDOM`` draws with ``sample`` (``torch.long`` one-hots)
    has_rsample = False

    def __init__(
        self,
        logits: torch.Tensor | None = None,
        probs: torch.Tensor | None = None,
        grad_method: ReparamGradientStrategy = ReparamGradientStrategy.PassThrough,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("validate_args", False)
        super().__init__(probs=probs, logits=logits, **kwargs)
        self.grad_method = grad_method

    def sample(self, sample_shape: torch.Size | list[int] | tuple[int, ...] = ()) -> torch.Tensor:
        """A one-hot sample, ``torch.long`` (as tensordict 0.15)."""
        return super().sample(sample_shape).long()

    @property
    def mode(self) -> torch.Tensor:
        """The most likely one-hot vector (the first of tied maxima), ``torch.long``."""
        logits = self.logits
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1])

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """The most likely one-hot vector (same as ``mode``)."""
        return self.mode

    def rsample(self, sample_shape: torch.Size | tuple = ()) -> torch.Tensor:  # type: ignore[override]
        """A one-hot sample through which gradients reach ``probs``/``logits``."""
        if self.grad_method is ReparamGradientStrategy.RelaxedOneHot:
            soft = D.RelaxedOneHotCategorical(torch.ones((), device=self.logits.device), logits=self.logits).rsample(sample_shape)
            hard = torch.nn.functional.one_hot(soft.argmax(-1), soft.shape[-1]).to(soft.dtype)
            return hard + soft - soft.detach()
        out = self.sample(sample_shape)
        probs = self.probs
        return out + probs - probs.detach()


def rand_one_hot(values: torch.Tensor, do_softmax: bool = True) -> torch.Tensor:
    """A random one-hot tensor drawn from ``values`` (logits, or probabilities if
    ``do_softmax=False``), same shape as ``values``, ``torch.long`` (as tensordict 0.15).

    Examples:
        >>> import torch
        >>> rand_one_hot(torch.zeros(2, 3)).sum(-1)
        tensor([1, 1])
    """
    probs = values.softmax(-1) if do_softmax else values
    idx = torch.multinomial(probs.reshape(-1, probs.shape[-1]), 1).reshape(probs.shape[:-1])
    return torch.nn.functional.one_hot(idx, probs.shape[-1])


_SQRT2 = math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _std_cdf(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * (1 + torch.erf(x / _SQRT2))


def _std_pdf(x: torch.Tensor) -> torch.Tensor:
    return torch.exp(-0.5 * x * x - _LOG_SQRT_2PI)


class TruncatedNormal(D.Distribution):
    """A normal distribution truncated to ``[low, high]``.

    Args:
        loc (Tensor): location of the untruncated normal.
        scale (Tensor): its scale (``> 0``).
        upscale (float, optional): with ``tanh_loc``, ``loc`` is squashed to
            ``[-upscale, upscale]``. Defaults to ``5.0``.
        low (float or Tensor, optional): lower bound. Defaults to ``-1.0``.
        high (float or Tensor, optional): upper bound. Defaults to ``1.0``.
        tanh_loc (bool, optional): squash ``loc`` with ``tanh``. Defaults to ``False``.
        a, b (float or Tensor, optional): tensordict 0.15's names of the bounds; when
            given they replace ``low`` / ``high``. ``dist.a`` / ``dist.b`` read back the
            bounds in standard units (``(bound - loc) / scale``).

    ``rsample`` draws by inverse-CDF sampling, so gradients reach ``loc`` and ``scale``.

    Raises:
        ValueError: ``low >= high``.

    Examples:
        >>> import torch
        >>> d = TruncatedNormal(torch.zeros(3), torch.ones(3), low=-0.5, high=0.5)
        >>> s = d.rsample((100,))
        >>> bool(((s >= -0.5) & (s <= 0.5)).all())
        True
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    has_rsample = True
    _eps = 1e-6

    def __init__(
        self,
        loc: torch.Tensor,
        scale: torch.Tensor,
        upscale: float = 5.0,
        low: float | torch.Tensor = -1.0,
        high: float | torch.Tensor = 1.0,
        tanh_loc: bool = False,
        validate_args: bool | None = None,
        *,
        a: float | torch.Tensor | None = None,
        b: float | torch.Tensor | None = None,
    ) -> None:
        if a is not None:
            low = a
        if b is not None:
            high = b
        if tanh_loc:
            loc = (loc / upscale).tanh() * upscale
        loc, scale = torch.broadcast_tensors(torch.as_tensor(loc), torch.as_tensor(scale, dtype=torch.as_tensor(loc).dtype))
        low = torch.as_tensor(low, dtype=loc.dtype, device=loc.device)
        high = torch.as_tensor(high, dtype=loc.dtype, device=loc.device)
        if bool((low >= high).any()):
            msg = f"TruncatedNormal: low must be smaller than high, got low={low.tolist()} high={high.tolist()}."
            raise ValueError(msg)
        self.loc, self.scale, self.low, self.high, self.upscale = loc, scale, low, high, upscale
        self._a = (low - loc) / scale
        self._b = (high - loc) / scale
        self._cdf_a = _std_cdf(self._a)
        self._z = (_std_cdf(self._b) - self._cdf_a).clamp_min(self._eps)
        super().__init__(loc.shape, validate_args=validate_args)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self) -> Any:  # noqa: D102
        return constraints.interval(self.low, self.high)

    @property
    def a(self) -> torch.Tensor:
        """The lower bound in standard units, ``(low - loc) / scale``."""
        return self._a

    @property
    def b(self) -> torch.Tensor:
        """The upper bound in standard units, ``(high - loc) / scale``."""
        return self._b

    @property
    def auc(self) -> torch.Tensor:
        """The mass of the untruncated normal inside the bounds, ``Phi(b) - Phi(a)``."""
        return self._z

    @property
    def mean(self) -> torch.Tensor:  # noqa: D102
        return self.loc + self.scale * (_std_pdf(self._a) - _std_pdf(self._b)) / self._z

    @property
    def variance(self) -> torch.Tensor:  # noqa: D102
        pa, pb = _std_pdf(self._a), _std_pdf(self._b)
        a, b = self._a.clamp(-1e6, 1e6), self._b.clamp(-1e6, 1e6)
        ratio = (pa - pb) / self._z
        return self.scale**2 * (1 + (a * pa - b * pb) / self._z - ratio**2)

    @property
    def mode(self) -> torch.Tensor:  # noqa: D102
        return torch.maximum(torch.minimum(self.loc, self.high), self.low)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """The mean of the truncated distribution."""
        return self.mean

    def cdf(self, value: torch.Tensor) -> torch.Tensor:  # noqa: D102
        out = (_std_cdf((value - self.loc) / self.scale) - self._cdf_a) / self._z
        return out.clamp(0, 1)

    def icdf(self, value: torch.Tensor) -> torch.Tensor:  # noqa: D102
        p = (self._cdf_a + value * self._z).clamp(self._eps, 1 - self._eps)
        x = self.loc + self.scale * _SQRT2 * torch.erfinv(2 * p - 1)
        return torch.maximum(torch.minimum(x, self.high), self.low)

    def rsample(self, sample_shape: torch.Size | tuple = ()) -> torch.Tensor:  # type: ignore[override]  # noqa: D102
        shape = self._extended_shape(torch.Size(sample_shape))
        u = torch.rand(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.icdf(u)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:  # noqa: D102
        if self._validate_args:
            self._validate_sample(value)
        x = (value - self.loc) / self.scale
        out = -0.5 * x * x - _LOG_SQRT_2PI - self.scale.log() - self._z.log()
        inside = (value >= self.low) & (value <= self.high)
        return torch.where(inside, out, torch.full_like(out, -math.inf))

    def entropy(self) -> torch.Tensor:  # noqa: D102
        a, b = self._a.clamp(-1e6, 1e6), self._b.clamp(-1e6, 1e6)
        term = (a * _std_pdf(self._a) - b * _std_pdf(self._b)) / (2 * self._z)
        return _LOG_SQRT_2PI + 0.5 + self.scale.log() + self._z.log() + term


class TruncatedStandardNormal(TruncatedNormal):
    """The standard normal (mean 0, std 1) restricted to ``[a, b]``; samples are
    reparameterized (``rsample``).

    Args:
        a (float or Tensor): the lower bound.
        b (float or Tensor): the upper bound; ``a`` and ``b`` broadcast together into
            the batch shape.
        validate_args (bool, optional): as for ``torch.distributions``.

    Raises:
        ValueError: ``a`` and ``b`` have different dtypes, or ``a >= b`` somewhere.

    Examples:
        >>> import torch
        >>> dist = TruncatedStandardNormal(a=torch.zeros(2), b=torch.tensor([1.0, 2.0]))
        >>> dist.mean
        tensor([0.4599, 0.7228])
        >>> dist.auc
        tensor([0.3413, 0.4772])
    """

    def __init__(self, a: float | torch.Tensor, b: float | torch.Tensor, validate_args: bool | None = None) -> None:
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype != b.dtype:
            msg = f"TruncatedStandardNormal: a and b must have the same dtype, got {a.dtype} and {b.dtype}."
            raise ValueError(msg)
        a_t = torch.as_tensor(a, dtype=b.dtype if isinstance(b, torch.Tensor) and not isinstance(a, torch.Tensor) else None)
        b_t = torch.as_tensor(b, dtype=a_t.dtype, device=a_t.device)
        if not a_t.is_floating_point():
            a_t, b_t = a_t.to(torch.get_default_dtype()), b_t.to(torch.get_default_dtype())
        a_t, b_t = torch.broadcast_tensors(a_t, b_t)
        zeros = torch.zeros_like(a_t)
        super().__init__(zeros, torch.ones_like(a_t), low=a_t, high=b_t, validate_args=validate_args)


# ---------------------------------------------------------------------------- composite

_LP_AGGREGATE = [False]


def composite_lp_aggregate(nowarn: bool = False) -> bool:
    """Whether :class:`CompositeDistribution` sums its log-probs/entropies into one tensor.

    Defaults to ``False``: ``log_prob`` and ``entropy`` return TensorDicts with one
    entry per sampled key.

    Examples:
        >>> composite_lp_aggregate()
        False
    """
    return _LP_AGGREGATE[0]


class set_composite_lp_aggregate(ModeSwitch):  # noqa: N801 - public name of the tensordict API
    """Sets :func:`composite_lp_aggregate`: context manager, decorator or ``.set()``/``.unset()``.

    Args:
        mode (bool, optional): the value to set. Defaults to ``True``.

    Examples:
        >>> with set_composite_lp_aggregate(True):
        ...     composite_lp_aggregate()
        True
    """

    def __init__(self, mode: bool = True) -> None:
        super().__init__()
        self.mode = bool(mode)

    def _read(self) -> bool:
        return _LP_AGGREGATE[0]

    def _write(self, value: bool) -> None:
        _LP_AGGREGATE[0] = value


def _suffixed(key: NestedKey, suffix: str) -> NestedKey:
    key = unravel_key(key)
    if isinstance(key, str):
        return key + suffix
    return (*key[:-1], key[-1] + suffix)  # type: ignore[operator]


class CompositeDistribution(D.Distribution):
    """A distribution over several keys of a TensorDict, one distribution per key.

    Args:
        params (TensorDictBase): one sub-TensorDict of distribution parameters per
            key of ``distribution_map`` (``params["cont"]`` holds ``loc`` and
            ``scale`` for a Normal at ``"cont"``). Its batch size is the batch shape.
        distribution_map (dict): key -> distribution class.

    Keyword Args:
        name_map (dict, optional): key -> where its sample is written. Defaults to the key.
        extra_kwargs (dict, optional): key -> extra keyword arguments of its distribution.
        aggregate_probabilities (bool, optional): sum log-probs and entropies into one
            tensor of the batch shape. Defaults to :func:`composite_lp_aggregate`.
        log_prob_key (NestedKey, optional): where :meth:`log_prob_composite` writes the
            sum. Defaults to ``"sample_log_prob"``.
        entropy_key (NestedKey, optional): where :meth:`entropy_composite` writes the
            sum. Defaults to ``"entropy"``.

    ``sample``/``rsample``/``mode``/``mean``/``deterministic_sample`` return a
    TensorDict of samples (batch size ``sample_shape + batch_shape``). ``log_prob`` and
    ``entropy`` return a TensorDict with an entry ``"<key>_log_prob"`` /
    ``"<key>_entropy"`` per key, or a tensor when aggregating.

    Raises:
        KeyError: ``params`` has no entry for a key of ``distribution_map``.

    Examples:
        >>> import torch
        >>> from torch import distributions as d
        >>> from tensordict import TensorDict
        >>> params = TensorDict({
        ...     "cont": {"loc": torch.randn(3, 4), "scale": torch.rand(3, 4) + 0.1},
        ...     ("nested", "disc"): {"logits": torch.randn(3, 10)},
        ... }, [3])
        >>> dist = CompositeDistribution(params, distribution_map={"cont": d.Normal, ("nested", "disc"): d.Categorical})
        >>> sample = dist.sample((4,))
        >>> sample["cont"].shape, sample["nested", "disc"].shape
        (torch.Size([4, 3, 4]), torch.Size([4, 3]))
        >>> dist.log_prob(sample)["nested", "disc_log_prob"].shape
        torch.Size([4, 3])
    """

    arg_constraints: dict = {}

    def __init__(
        self,
        params: TensorDictBase,
        distribution_map: Mapping,
        *,
        name_map: Mapping | None = None,
        extra_kwargs: Mapping | None = None,
        aggregate_probabilities: bool | None = None,
        log_prob_key: NestedKey = "sample_log_prob",
        entropy_key: NestedKey = "entropy",
    ) -> None:
        if not isinstance(params, TensorDictBase):
            msg = f"CompositeDistribution: params must be a TensorDict, got {type(params).__name__}."
            raise TypeError(msg)
        name_map = {unravel_key(k): unravel_key(v) for k, v in (name_map or {}).items()}
        extra = {unravel_key(k): dict(v) for k, v in (extra_kwargs or {}).items()}
        self.dists: dict = {}
        self.name_map: dict = {}
        for key, cls in distribution_map.items():
            key = unravel_key(key)
            sub = params.get(key, None)
            if sub is None:
                keys = sorted(str(k) for k in params.keys(True))
                msg = f"CompositeDistribution: params has no entry {key!r} for its distribution; params keys: {keys}."
                raise _ReadableKeyError(msg)
            kwargs = dict(sub.items()) if isinstance(sub, TensorDictBase) else {"logits": sub}
            kwargs.update(extra.get(key, {}))
            self.dists[key] = cls(**kwargs)
            self.name_map[key] = name_map.get(key, key)
        self.params = params
        self.aggregate_probabilities = aggregate_probabilities
        self.log_prob_key = unravel_key(log_prob_key)
        self.entropy_key = unravel_key(entropy_key)
        super().__init__(params.batch_size, validate_args=False)

    @classmethod
    def from_distributions(
        cls,
        params: TensorDictBase,
        distributions: Mapping,
        *,
        name_map: Mapping | None = None,
        aggregate_probabilities: bool | None = None,
        log_prob_key: NestedKey = "sample_log_prob",
        entropy_key: NestedKey = "entropy",
    ) -> CompositeDistribution:
        """A composite of distributions already built, one per sampled key.

        Args:
            params (TensorDictBase): the parameters they were built from; its batch
                size is the batch shape.
            distributions (dict): key -> ``torch.distributions.Distribution``.

        The keyword arguments ``name_map``, ``aggregate_probabilities``,
        ``log_prob_key`` and ``entropy_key`` mean what they mean for the constructor.

        Returns:
            a :class:`CompositeDistribution`.

        Examples:
            >>> import torch
            >>> from torch import distributions as d
            >>> from tensordict import TensorDict
            >>> dist = CompositeDistribution.from_distributions(
            ...     TensorDict(batch_size=[3]),
            ...     {"a": d.Normal(torch.zeros(3), torch.ones(3)), ("b", "c"): d.Bernoulli(torch.full((3,), 0.5))})
            >>> dist.sample()["b", "c"].shape
            torch.Size([3])
        """
        if not isinstance(params, TensorDictBase):
            msg = f"CompositeDistribution.from_distributions: params must be a TensorDict, got {type(params).__name__}."
            raise TypeError(msg)
        obj = cls.__new__(cls)
        names = {unravel_key(k): unravel_key(v) for k, v in (name_map or {}).items()}
        obj.dists = {}
        obj.name_map = {}
        for key, dist in distributions.items():
            key = unravel_key(key)
            obj.dists[key] = dist
            obj.name_map[key] = names.get(key, key)
        obj.params = params
        obj.aggregate_probabilities = aggregate_probabilities
        obj.log_prob_key = unravel_key(log_prob_key)
        obj.entropy_key = unravel_key(entropy_key)
        D.Distribution.__init__(obj, params.batch_size, validate_args=False)
        return obj

    def __getitem__(self, key: NestedKey) -> D.Distribution:
        """The distribution that writes its sample at ``key`` (the key after ``name_map``).

        Raises:
            KeyError: no distribution writes at ``key``.

        Examples:
            >>> import torch
            >>> from torch import distributions as d
            >>> from tensordict import TensorDict
            >>> params = TensorDict({"cont": {"loc": torch.zeros(3), "scale": torch.ones(3)}}, [3])
            >>> CompositeDistribution(params, {"cont": d.Normal})["cont"]
            Normal(loc: torch.Size([3]), scale: torch.Size([3]))
        """
        try:
            name = unravel_key(key)
        except (TypeError, RuntimeError):
            raise KeyError(key) from None
        for source, written in self.name_map.items():
            if written == name:
                return self.dists[source]
        raise KeyError(key)

    def _aggregate(self) -> bool:
        agg = self.aggregate_probabilities
        return composite_lp_aggregate() if agg is None else agg

    def _samples(self, fn: Any, sample_shape: torch.Size) -> TensorDict:
        out = TensorDict({}, batch_size=torch.Size(sample_shape) + self.batch_shape)
        for key, dist in self.dists.items():
            out.set(self.name_map[key], fn(dist))
        return out

    def sample(self, sample_shape: torch.Size | tuple = ()) -> TensorDict:  # type: ignore[override]
        """A TensorDict of samples, batch size ``sample_shape + batch_shape``."""
        shape = torch.Size(sample_shape)
        return self._samples(lambda d: d.sample(shape), shape)

    def rsample(self, sample_shape: torch.Size | tuple = ()) -> TensorDict:  # type: ignore[override]
        """Reparameterised samples (every distribution must support ``rsample``)."""
        shape = torch.Size(sample_shape)
        return self._samples(lambda d: d.rsample(shape), shape)

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        return all(d.has_rsample for d in self.dists.values())

    @property
    def mode(self) -> TensorDict:  # type: ignore[override]  # noqa: D102
        return self._samples(lambda d: d.mode, torch.Size())

    @property
    def mean(self) -> TensorDict:  # type: ignore[override]  # noqa: D102
        return self._samples(lambda d: d.mean, torch.Size())

    @property
    def deterministic_sample(self) -> TensorDict:
        """Each distribution's ``deterministic_sample`` (or mean, or mode)."""

        def det(d: Any) -> torch.Tensor:
            from tensordict.nn._probabilistic import _deterministic_order

            for attr in _deterministic_order(d):  # mode first for enumerable supports
                try:
                    return getattr(d, attr)
                except (AttributeError, NotImplementedError):
                    continue
            msg = f"{type(d).__name__} has no deterministic sample, mean or mode."
            raise NotImplementedError(msg)

        return self._samples(det, torch.Size())

    def _reduce(self, value: torch.Tensor, ndim: int) -> torch.Tensor:
        extra = value.ndim - ndim
        return value.flatten(ndim).sum(-1) if extra > 0 else value

    def _per_key(self, values: dict, suffix: str, batch_size: torch.Size) -> TensorDict | torch.Tensor:
        if self._aggregate():
            total = None
            for value in values.values():
                value = self._reduce(value, len(batch_size))
                total = value if total is None else total + value
            return total  # type: ignore[return-value]
        out = TensorDict({}, batch_size=batch_size)
        for key, value in values.items():
            out.set(_suffixed(self.name_map[key], suffix), value)
        return out

    def log_prob(self, sample: TensorDictBase) -> TensorDict | torch.Tensor:  # type: ignore[override]
        """Log-probabilities of a TensorDict of samples.

        Returns:
            a TensorDict with ``"<key>_log_prob"`` entries, or (aggregating) their
            sum, a tensor of shape ``sample.batch_size``.

        Raises:
            KeyError: a sampled key is missing from ``sample``.
        """
        values = {key: dist.log_prob(sample.get(self.name_map[key])) for key, dist in self.dists.items()}
        return self._per_key(values, "_log_prob", sample.batch_size)

    def log_prob_composite(
        self, sample: TensorDictBase, include_sum: bool | None = None, *, inplace: bool = False
    ) -> TensorDictBase:
        """Each key's log-prob at ``"<key>_log_prob"`` (and their sum at ``log_prob_key``).

        Args:
            sample (TensorDictBase): the samples.
            include_sum (bool, optional): also write the sum over keys (each reduced to
                the batch shape). Defaults to :func:`composite_lp_aggregate`.

        Keyword Args:
            inplace (bool, optional): write into ``sample`` instead of a new
                TensorDict. Defaults to ``False``.

        Returns:
            the TensorDict of log-probabilities (``sample`` itself with ``inplace=True``).
        """
        if include_sum is None:
            include_sum = self._aggregate()
        out = sample if inplace else TensorDict({}, batch_size=sample.batch_size)
        total = None
        for key, dist in self.dists.items():
            lp = dist.log_prob(sample.get(self.name_map[key]))
            out.set(_suffixed(self.name_map[key], "_log_prob"), lp)
            red = self._reduce(lp, sample.batch_dims)
            total = red if total is None else total + red
        if include_sum and total is not None:
            out.set(self.log_prob_key, total)
        return out

    def entropy(self, samples_mc: int = 1) -> TensorDict | torch.Tensor:  # type: ignore[override]
        """Entropies (Monte-Carlo estimated with ``samples_mc`` samples where no closed form exists)."""
        values = {}
        for key, dist in self.dists.items():
            try:
                values[key] = dist.entropy()
            except NotImplementedError:
                x = dist.rsample((samples_mc,)) if dist.has_rsample else dist.sample((samples_mc,))
                values[key] = -dist.log_prob(x).mean(0)
        return self._per_key(values, "_entropy", self.batch_shape)

    def entropy_composite(self, samples_mc: int = 1, include_sum: bool = True) -> TensorDict:
        """A TensorDict of each key's entropy, plus their sum at ``entropy_key``."""
        with set_composite_lp_aggregate(False):
            out = self.entropy(samples_mc)
        if include_sum:
            total = None
            for _, value in out.items(True, True):  # type: ignore[union-attr]
                red = self._reduce(value, len(self.batch_shape))
                total = red if total is None else total + red
            out.set(self.entropy_key, total)  # type: ignore[union-attr]
        return out  # type: ignore[return-value]

    def cdf(self, sample: TensorDictBase) -> TensorDictBase:  # type: ignore[override]
        """Writes each key's CDF at the sample under ``"<key>_cdf"`` into ``sample``
        and returns it (as tensordict 0.15)."""
        for key, dist in self.dists.items():
            name = self.name_map[key]
            sample.set(_suffixed(name, "_cdf"), dist.cdf(sample.get(name)))
        return sample

    def icdf(self, sample: TensorDictBase) -> TensorDictBase:  # type: ignore[override]
        """Reads the quantiles stored under ``"<key>_cdf"`` and writes each key's inverse
        CDF at them under ``"<key>_icdf"`` into ``sample``; returns ``sample`` (as
        tensordict 0.15: ``dist.icdf(dist.cdf(x))`` holds ``x`` again at ``"<key>_icdf"``)."""
        for key, dist in self.dists.items():
            name = self.name_map[key]
            sample.set(_suffixed(name, "_icdf"), dist.icdf(sample.get(_suffixed(name, "_cdf"))))
        return sample
