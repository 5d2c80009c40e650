"""Probabilistic modules: build a distribution from TensorDict entries and write a sample.

``InteractionType`` says how the value is drawn (``MODE``, ``MEDIAN``, ``MEAN``,
``RANDOM``, ``DETERMINISTIC``); :class:`set_interaction_type` overrides every
module's default within a block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

import torch
from torch import distributions as D  # noqa: N812

from tensordict import TensorDictBase
from tensordict._keys import NestedKey
from tensordict.nn._common import (
    _NOTSET,
    _SKIP_EXISTING,
    TensorDictModuleBase,
    _all_present,
    _handles_kwargs,
    _infer_batch_size_,
    _missing_in_key_error,
    _normalize_keys,
)
from tensordict.nn._distributions import CompositeDistribution, Delta
from tensordict.nn._sequence import TensorDictSequential
from tensordict.utils import ModeSwitch

__all__ = [
    "InteractionType",
    "ProbabilisticTensorDictModule",
    "ProbabilisticTensorDictSequential",
    "interaction_type",
    "set_interaction_type",
]


class InteractionType(Enum):
    """How a probabilistic module turns its distribution into a value.

    - ``MODE``: ``dist.mode``;
    - ``MEDIAN``: ``dist.median`` (or ``icdf(0.5)``, or an empirical median);
    - ``MEAN``: ``dist.mean`` (or an empirical mean);
    - ``RANDOM``: ``dist.rsample()`` when available, else ``dist.sample()``;
    - ``DETERMINISTIC``: ``dist.deterministic_sample`` if defined, else the mean,
      else the mode.

    Examples:
        >>> InteractionType.from_str("random")
        <InteractionType.RANDOM: 4>
    """

    MODE = 1
    MEDIAN = 2
    MEAN = 3
    RANDOM = 4
    DETERMINISTIC = 5

    @classmethod
    def from_str(cls, type_str: str) -> InteractionType:
        """The member named ``type_str`` (case insensitive).

        Raises:
            ValueError: no member has that name.
        """
        for member in cls:
            if member.name == type_str.upper():
                return member
        msg = f"Unknown interaction type {type_str!r}; expected one of {[m.name for m in cls]}."
        raise ValueError(msg)


_INTERACTION_TYPE: list = [None]


def interaction_type() -> InteractionType | None:
    """The interaction type set by :class:`set_interaction_type`, or ``None``.

    Examples:
        >>> interaction_type() is None
        True
    """
    return _INTERACTION_TYPE[0]


class set_interaction_type(ModeSwitch):  # noqa: N801 - public name of the tensordict API
    """Sets :func:`interaction_type`: every probabilistic module draws with ``type``.

    A context manager, a decorator, or ``set_interaction_type(t).set()`` /
    ``.unset()`` for process-wide use; creating the object changes nothing.

    Args:
        type (InteractionType or str, optional): the interaction type. Defaults to
            ``InteractionType.DETERMINISTIC``.

    Examples:
        >>> with set_interaction_type(InteractionType.RANDOM):
        ...     interaction_type()
        <InteractionType.RANDOM: 4>
    """

    def __init__(self, type: InteractionType | str | None = InteractionType.DETERMINISTIC) -> None:  # noqa: A002
        super().__init__()
        if isinstance(type, str):
            type = InteractionType.from_str(type)  # noqa: A001
        self.type = type

    @property
    def mode(self) -> InteractionType | None:  # type: ignore[override]
        return self.type

    def _read(self) -> InteractionType | None:
        return _INTERACTION_TYPE[0]

    def _write(self, value: InteractionType | None) -> None:
        _INTERACTION_TYPE[0] = value


def _draw(dist: D.Distribution, itype: InteractionType, n_empirical: int) -> Any:
    """Draws from ``dist`` according to ``itype``."""
    if itype is InteractionType.RANDOM:
        return dist.rsample() if dist.has_rsample else dist.sample()
    if itype is InteractionType.DETERMINISTIC:
        try:
            return dist.deterministic_sample
        except (AttributeError, NotImplementedError):
            pass
        try:
            return dist.mean
        except NotImplementedError:
            return dist.mode
    if itype is InteractionType.MODE:
        try:
            return dist.mode
        except NotImplementedError:
            msg = f"{type(dist).__name__} has no mode; use another InteractionType (e.g. RANDOM or MEAN)."
            raise NotImplementedError(msg) from None
    if itype is InteractionType.MEAN:
        try:
            return dist.mean
        except NotImplementedError:
            samples = dist.rsample((n_empirical,)) if dist.has_rsample else dist.sample((n_empirical,))
            return samples.mean(0)
    if itype is InteractionType.MEDIAN:
        median = getattr(type(dist), "median", None)
        if median is not None:
            return dist.median
        try:
            return dist.icdf(torch.full(dist.batch_shape + dist.event_shape, 0.5))
        except NotImplementedError:
            samples = dist.rsample((n_empirical,)) if dist.has_rsample else dist.sample((n_empirical,))
            return samples.median(0).values
    msg = f"Unknown interaction type {itype!r}."
    raise ValueError(msg)


class ProbabilisticTensorDictModule(TensorDictModuleBase):
    """Builds a distribution from TensorDict entries and writes a value drawn from it.

    Args:
        in_keys (NestedKey, list of NestedKey or dict): the entries holding the
            distribution's parameters. With a list, each key's last part is the
            keyword of ``distribution_class`` (``"loc"``, ``"scale"``, ...); a dict maps
            keywords to tensordict keys (``{"loc": ("policy", "mu")}``).
        out_keys (NestedKey or list of NestedKey, optional): where the value is
            written. For a :class:`CompositeDistribution`, defaults to the sampled keys.

    Keyword Args:
        default_interaction_type (InteractionType, optional): how the value is drawn
            when no :class:`set_interaction_type` is active. Defaults to
            ``InteractionType.DETERMINISTIC``.
        distribution_class (type, optional): a ``torch.distributions.Distribution``
            class. Defaults to :class:`~tensordict.nn.distributions.Delta`.
        distribution_kwargs (dict, optional): extra keyword arguments of the class.
        return_log_prob (bool, optional): also write the log-probability of the
            value at ``log_prob_key``. Defaults to ``False``.
        log_prob_key (NestedKey, optional): defaults to ``"sample_log_prob"``.
        cache_dist (bool, optional): keep the last distribution in ``self._dist``.
            Defaults to ``False``.
        n_empirical_estimate (int, optional): samples used for empirical means and
            medians. Defaults to ``1000``.

    Raises:
        ValueError: no ``out_keys`` (and they cannot be inferred).
        TypeError: a key is not a str / tuple of str.

    When every key of ``out_keys`` is already present and :func:`skip_existing` is
    on, nothing is drawn.

    Examples:
        >>> import torch
        >>> from torch import distributions as d
        >>> from tensordict import TensorDict
        >>> module = ProbabilisticTensorDictModule(
        ...     in_keys=["loc", "scale"], out_keys=["action"], distribution_class=d.Normal,
        ...     return_log_prob=True)
        >>> td = module(TensorDict(loc=torch.zeros(3, 2), scale=torch.ones(3, 2), batch_size=[3]))
        >>> td["action"]  # DETERMINISTIC: the mean
        tensor([[0., 0.],
                [0., 0.],
                [0., 0.]])
        >>> td["sample_log_prob"].shape
        torch.Size([3, 2])
    """

    _tracks_keys = True

    def __init__(
        self,
        in_keys: NestedKey | Sequence[NestedKey] | Mapping,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        *,
        default_interaction_type: InteractionType | str = InteractionType.DETERMINISTIC,
        distribution_class: type = Delta,
        distribution_kwargs: dict | None = None,
        return_log_prob: bool = False,
        log_prob_key: NestedKey | None = None,
        cache_dist: bool = False,
        n_empirical_estimate: int = 1000,
    ) -> None:
        super().__init__()
        owner = type(self).__name__
        if isinstance(in_keys, Mapping):
            dist_keys = {str(k): v for k, v in in_keys.items()}
            td_keys = _normalize_keys(list(dist_keys.values()), "in_keys", owner)
            self._dist_keys = dict(zip(dist_keys, td_keys))
        else:
            td_keys = _normalize_keys(in_keys, "in_keys", owner)
            self._dist_keys = {(k if isinstance(k, str) else k[-1]): k for k in td_keys}
        self.distribution_kwargs = dict(distribution_kwargs or {})
        self.distribution_class = distribution_class
        if out_keys is None:
            if isinstance(distribution_class, type) and issubclass(distribution_class, CompositeDistribution):
                name_map = self.distribution_kwargs.get("name_map") or {}
                out_keys = [name_map.get(k, k) for k in self.distribution_kwargs.get("distribution_map", {})]
            if not out_keys:
                msg = f"{owner}: out_keys is required (where to write the drawn value)."
                raise ValueError(msg)
        self.in_keys = td_keys
        self.dist_sample_keys = _normalize_keys(out_keys, "out_keys", owner)
        if isinstance(default_interaction_type, str):
            default_interaction_type = InteractionType.from_str(default_interaction_type)
        self.default_interaction_type = default_interaction_type
        self.return_log_prob = bool(return_log_prob)
        self.log_prob_key = log_prob_key if log_prob_key is not None else "sample_log_prob"
        self.out_keys = list(self.dist_sample_keys) + ([self.log_prob_key] if self.return_log_prob else [])
        self.cache_dist = cache_dist
        self.n_empirical_estimate = n_empirical_estimate
        self._dist = None

    @property
    def dist_params_keys(self) -> list:
        """The tensordict keys read to build the distribution."""
        return list(self._dist_keys.values())

    def get_dist(self, tensordict: TensorDictBase) -> D.Distribution:
        """Builds the distribution from the entries of ``tensordict``.

        Raises:
            KeyError: a parameter entry is missing.
            TypeError: the entries do not match the distribution's keywords.
        """
        kwargs = {}
        for name, key in self._dist_keys.items():
            value = tensordict.get(key, _NOTSET)
            if value is _NOTSET:
                raise _missing_in_key_error(f"{type(self).__name__}(distribution_class={getattr(self.distribution_class, '__name__', self.distribution_class)})", key, tensordict)
            kwargs[name] = value
        try:
            dist = self.distribution_class(**kwargs, **self.distribution_kwargs)
        except TypeError as err:
            msg = (
                f"{type(self).__name__}: could not build {getattr(self.distribution_class, '__name__', self.distribution_class)} "
                f"from keywords {sorted(kwargs)} (in_keys {self._dist_keys}) and distribution_kwargs "
                f"{sorted(self.distribution_kwargs)}: {err}"
            )
            raise TypeError(msg) from err
        if self.cache_dist:
            self._dist = dist
        return dist

    def log_prob(self, tensordict: TensorDictBase, *, dist: D.Distribution | None = None) -> Any:
        """Log-probability of the values stored at ``out_keys`` under the distribution."""
        if dist is None:
            dist = self.get_dist(tensordict)
        if isinstance(dist, CompositeDistribution):
            return dist.log_prob(tensordict)
        return dist.log_prob(*[tensordict.get(k) for k in self.dist_sample_keys])

    @_handles_kwargs
    def forward(
        self,
        tensordict: TensorDictBase | None = None,
        tensordict_out: TensorDictBase | None = None,
        _requires_sample: bool = True,
        **kwargs: Any,
    ) -> TensorDictBase:
        """Builds the distribution, draws a value and writes it at ``out_keys``.

        Returns:
            the TensorDict holding the value (``tensordict`` itself by default).

        Raises:
            KeyError: a parameter entry is missing (nothing is written).
        """
        if not isinstance(tensordict, TensorDictBase):
            td = self._td_from_call(tensordict, (), kwargs)
            return _infer_batch_size_(self.forward(td, tensordict_out=tensordict_out))
        if _SKIP_EXISTING[0] and _all_present(tensordict, self.dist_sample_keys):
            return tensordict
        dest = tensordict if tensordict_out is None else tensordict_out
        dist = self.get_dist(tensordict)
        if _requires_sample:
            itype = _INTERACTION_TYPE[0] or self.default_interaction_type
            value = _draw(dist, itype, self.n_empirical_estimate)
            if isinstance(value, TensorDictBase):
                dest.update(value)
                values = [value]
            else:
                values = list(value) if isinstance(value, (tuple, list)) else [value]
                if len(values) != len(self.dist_sample_keys):
                    msg = (
                        f"{type(self).__name__}: the distribution produced {len(values)} value(s) but "
                        f"{len(self.dist_sample_keys)} out_keys were given ({self.dist_sample_keys})."
                    )
                    raise ValueError(msg)
                for key, v in zip(self.dist_sample_keys, values):
                    dest.set(key, v)
        elif isinstance(dist, CompositeDistribution):
            values = [tensordict]
        else:
            values = [tensordict.get(k) for k in self.dist_sample_keys]
        if self.return_log_prob:
            if isinstance(dist, CompositeDistribution):
                lp = dist.log_prob(values[0] if _requires_sample else tensordict)
                if isinstance(lp, TensorDictBase):
                    dest.update(lp)
                else:
                    dest.set(self.log_prob_key, lp)
            else:
                dest.set(self.log_prob_key, dist.log_prob(*values))
        return dest


class ProbabilisticTensorDictSequential(TensorDictSequential):
    """A :class:`TensorDictSequential` whose last step is a :class:`ProbabilisticTensorDictModule`.

    Adds :meth:`get_dist` (run every step but the last, then build the distribution)
    and :meth:`log_prob`.

    Args:
        *modules: the steps; the last must be a ``ProbabilisticTensorDictModule``.

    Keyword Args:
        partial_tolerant (bool, optional): see :class:`TensorDictSequential`.

    Raises:
        ValueError: the last step is not probabilistic.

    Examples:
        >>> import torch
        >>> from torch import nn, distributions as d
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule, NormalParamExtractor
        >>> policy = ProbabilisticTensorDictSequential(
        ...     TensorDictModule(nn.Linear(3, 4), in_keys=["obs"], out_keys=["params"]),
        ...     TensorDictModule(NormalParamExtractor(), in_keys=["params"], out_keys=["loc", "scale"]),
        ...     ProbabilisticTensorDictModule(["loc", "scale"], ["action"], distribution_class=d.Normal),
        ... )
        >>> td = TensorDict(obs=torch.randn(5, 3), batch_size=[5])
        >>> policy.get_dist(td).batch_shape
        torch.Size([5, 2])
        >>> policy(td)["action"].shape
        torch.Size([5, 2])
    """

    def __init__(self, *modules: Any, partial_tolerant: bool = False, **kwargs: Any) -> None:
        mods = list(modules[0].values()) if len(modules) == 1 and isinstance(modules[0], Mapping) else list(modules)
        if not mods or not isinstance(mods[-1], ProbabilisticTensorDictModule):
            last = type(mods[-1]).__name__ if mods else "nothing"
            msg = f"ProbabilisticTensorDictSequential: the last step must be a ProbabilisticTensorDictModule, got {last}."
            raise ValueError(msg)
        super().__init__(*modules, partial_tolerant=partial_tolerant, **kwargs)

    def get_dist_params(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Runs every step but the last (writing the distribution parameters)."""
        for m in self._modules_list()[:-1]:
            tensordict = m(tensordict)
        return tensordict

    def get_dist(self, tensordict: TensorDictBase) -> D.Distribution:
        """The distribution of the last step, after running the previous ones on ``tensordict``."""
        tensordict = self.get_dist_params(tensordict)
        return self._modules_list()[-1].get_dist(tensordict)

    build_dist_from_params = get_dist

    def log_prob(self, tensordict: TensorDictBase) -> Any:
        """Log-probability of the values at the last step's ``out_keys``."""
        dist = self.get_dist(tensordict)
        return self._modules_list()[-1].log_prob(tensordict, dist=dist)

    @property
    def dist_sample_keys(self) -> list:
        """The keys the last step writes its draw to."""
        return self._modules_list()[-1].dist_sample_keys
