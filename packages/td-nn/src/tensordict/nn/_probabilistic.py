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
from torch.distributions.relaxed_bernoulli import LogitRelaxedBernoulli as _LogitRelaxedBernoulli
from torch.distributions.relaxed_categorical import ExpRelaxedCategorical as _ExpRelaxedCategorical

from tensordict import NestedKey, NonTensorData, TensorDictBase
from tensordict.ext import unravel_key  # the strict one: raises on a tuple that is no key
from tensordict.nn._common import (
    _NOTSET,
    _SKIP_EXISTING,
    TensorDictModuleBase,
    _all_present,
    _handles_kwargs,
    _infer_batch_size_,
    _missing_in_key_error,
    _normalize_keys,
    _tensor_call_output,
)
from tensordict.nn._distributions import (
    CompositeDistribution,
    Delta,
    _suffixed,
    composite_lp_aggregate,
)
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
    - ``DETERMINISTIC``: ``dist.deterministic_sample`` if defined, else the mode for
      a distribution with enumerable support (Categorical, Bernoulli, Binomial,
      OneHotCategorical) and the mean for the others (the other one when the first
      is not implemented), else (for a transformed distribution) the transformed
      deterministic value of its base distribution. The choice depends on the
      class only, never on the values, so it can be traced (``torch.export``,
      ``torch.compile``).

    The values are the lower-case names (``InteractionType("mode")``, which is also
    what ``str()`` gives); the constructor accepts any case (``InteractionType("MODE")``).

    Examples:
        >>> InteractionType.from_str("RanDom")
        <InteractionType.RANDOM: 'random'>
        >>> str(InteractionType.MODE)
        'mode'
    """

    MODE = "mode"
    MEDIAN = "median"
    MEAN = "mean"
    RANDOM = "random"
    DETERMINISTIC = "deterministic"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def _missing_(cls, value: object) -> InteractionType | None:
        # InteractionType("RANDOM") or ("Random") finds RANDOM, as in tensordict 0.15;
        # anything else (None returned) raises Enum's ValueError
        return cls.__members__.get(value.upper()) if isinstance(value, str) else None

    @classmethod
    def from_str(cls, type_str: str) -> InteractionType:
        """The member named ``type_str`` (case insensitive).

        Raises:
            ValueError: ``'<type_str>' is not a valid InteractionType``.
        """
        return cls(type_str.lower())


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
        <InteractionType.RANDOM: 'random'>
    """

    def __init__(self, type: InteractionType | str | None = InteractionType.DETERMINISTIC) -> None:  # noqa: A002
        super().__init__()
        if isinstance(type, str):
            type = InteractionType.from_str(type)  # noqa: A001
        self.type = type

    @property
    def mode(self) -> InteractionType | None:
        return self.type

    def _read(self) -> InteractionType | None:
        return _INTERACTION_TYPE[0]

    def _write(self, value: InteractionType | None) -> None:
        _INTERACTION_TYPE[0] = value


def _deterministic_order(dist: Any) -> tuple[str, ...]:
    """The attributes a DETERMINISTIC draw tries, in order, for ``dist``'s class.

    The mode first for a class with enumerable support (a Categorical's mean is nan,
    a Bernoulli's is not a value of the support), the mean first for the others.
    Chosen from the class alone: a check on the values (e.g. "is the mean nan?") would
    be data-dependent and break ``torch.export`` / ``torch.compile``.
    """
    base = dist.base_dist if isinstance(dist, D.Independent) else dist
    if getattr(type(base), "has_enumerate_support", False) is True:
        return ("deterministic_sample", "mode", "mean")
    return ("deterministic_sample", "mean", "mode")


def _deterministic(dist: D.Distribution) -> Any:
    """``deterministic_sample``, else the mode or the mean, else the transformed base value."""
    for attr in _deterministic_order(dist):
        try:
            return getattr(dist, attr)
        except (AttributeError, NotImplementedError):
            continue
    if isinstance(dist, _LogitRelaxedBernoulli):
        return dist.logits / dist.temperature  # the noise-free relaxed logit
    if isinstance(dist, _ExpRelaxedCategorical):
        scores = dist.logits / dist.temperature  # the noise-free relaxed log-probabilities
        return scores - scores.logsumexp(-1, keepdim=True)
    if isinstance(dist, D.TransformedDistribution):
        value = _deterministic(dist.base_dist)
        for transform in dist.transforms:
            value = transform(value)
        return value
    msg = (
        f"Cannot draw a DETERMINISTIC value from {type(dist).__name__}: neither a "
        "deterministic_sample nor a mean nor a mode is defined (DETERMINISTIC, MEAN and MODE "
        "all fail). Use InteractionType.RANDOM, or set the module's default_interaction_type."
    )
    raise RuntimeError(msg)


def _empirical(dist: D.Distribution, n: int) -> torch.Tensor:
    return dist.rsample((n,)) if dist.has_rsample else dist.sample((n,))


_NO_SHAPE = torch.Size()


def _draw(dist: D.Distribution, itype: InteractionType, n_empirical: int, shape: torch.Size = _NO_SHAPE) -> Any:
    """Draws from ``dist`` according to ``itype`` (``shape`` extra leading sample dims)."""
    if itype is InteractionType.RANDOM:
        return dist.rsample(shape) if dist.has_rsample else dist.sample(shape)
    if itype is InteractionType.DETERMINISTIC:
        value = _deterministic(dist)
    elif itype is InteractionType.MODE:
        try:
            value = dist.mode
        except NotImplementedError:
            msg = f"{type(dist).__name__} has no mode; use another InteractionType (e.g. RANDOM or MEAN)."
            raise NotImplementedError(msg) from None
    elif itype is InteractionType.MEAN:
        try:
            value = dist.mean
        except NotImplementedError:
            value = _empirical(dist, n_empirical).mean(0)
    elif itype is InteractionType.MEDIAN:
        if getattr(type(dist), "median", None) is not None:
            value = dist.median  # type: ignore[attr-defined]
        else:
            try:
                value = dist.icdf(torch.full(dist.batch_shape + dist.event_shape, 0.5))
            except NotImplementedError:
                value = _empirical(dist, n_empirical).median(0).values
    else:
        msg = f"Unknown interaction type {itype!r}."
        raise ValueError(msg)
    if shape:
        value = value.expand(*shape, *value.shape)
    return value


def _lp_name(key: NestedKey) -> NestedKey:
    """``"action"`` -> ``"action_log_prob"``, ``("a", "b")`` -> ``("a", "b_log_prob")``."""
    return _suffixed(key, "_log_prob")


def _check_generator(generator: Any, owner: str) -> Any:
    if generator is None or isinstance(generator, torch.Generator):
        return generator
    if isinstance(generator, int) and not isinstance(generator, bool):
        return torch.Generator().manual_seed(generator)
    if isinstance(generator, (str, tuple)):
        return unravel_key(generator)
    msg = (
        f"{owner}: generator must be a torch.Generator, an int seed, a tensordict key "
        f"(NestedKey) or None, got {type(generator).__name__} ({generator!r})."
    )
    raise TypeError(msg)


def _run_with_generator(generator: torch.Generator | None, fn: Any) -> Any:
    """Runs ``fn`` with the global CPU RNG drawing from ``generator`` (advanced in place)."""
    if generator is None:
        return fn()
    with torch.random.fork_rng(devices=[]):
        torch.set_rng_state(generator.get_state())
        out = fn()
        generator.set_state(torch.get_rng_state())
    return out


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
        default_interaction_type (InteractionType or str, optional): how the value is
            drawn when no :class:`set_interaction_type` is active. Defaults to
            ``InteractionType.DETERMINISTIC``.
        distribution_class (type, optional): a ``torch.distributions.Distribution``
            class (or a callable returning one). Defaults to
            :class:`~tensordict.nn.distributions.Delta`.
        distribution_kwargs (dict, optional): extra keyword arguments of the class.
        return_log_prob (bool, optional): also write the log-probability of the
            value at :attr:`log_prob_keys`. Defaults to ``False``.
        log_prob_key (NestedKey, optional): where the log-probability goes. Defaults
            to ``"<sample key>_log_prob"`` (``"sample_log_prob"`` while
            :func:`~tensordict.nn.composite_lp_aggregate` is on).
        log_prob_keys (list of NestedKey, optional): one key per sampled key (for
            composite distributions).
        cache_dist (bool, optional): keep the last distribution in ``self._dist``.
            Defaults to ``False``.
        n_empirical_estimate (int, optional): samples used for empirical means and
            medians. Defaults to ``1000``.
        num_samples (int or tuple of int, optional): draw this many samples; the
            output is the input expanded to ``[*num_samples, *batch_size]``.
        generator (torch.Generator, int, NestedKey or None, optional): the random
            stream of ``RANDOM`` draws. A generator is advanced in place and the
            global RNG is untouched; an int seeds a new generator; a key reads the
            generator (or an int / int tensor seed, then replaced by the next seed)
            from the input TensorDict.

    Raises:
        ValueError: no ``out_keys`` (and they cannot be inferred).
        TypeError: a key is not a str / tuple of str, or ``generator`` has a wrong type.

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
        >>> td["action_log_prob"].shape
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
        log_prob_keys: Sequence[NestedKey] | None = None,
        cache_dist: bool = False,
        n_empirical_estimate: int = 1000,
        num_samples: int | Sequence[int] | None = None,
        generator: torch.Generator | int | NestedKey | None = None,
    ) -> None:
        super().__init__()
        owner = type(self).__name__
        if isinstance(in_keys, Mapping):
            dist_keys = {str(k): v for k, v in in_keys.items()}
            td_keys = _normalize_keys(list(dist_keys.values()), "in_keys", owner)
            self._dist_keys = dict(zip(dist_keys, td_keys))
        else:
            td_keys = _normalize_keys(in_keys, "in_keys", owner)
            self._dist_keys = {(k if isinstance(k, str) else k[-1]): k for k in td_keys}  # type: ignore[misc]
        self.distribution_kwargs: dict[str, Any] | TensorDictBase
        if isinstance(distribution_kwargs, TensorDictBase):
            # kept as given (no bool(): a TensorDict has no truth value): a TensorDictParams
            # is then a submodule, its tensors among the module's buffers/parameters
            self.distribution_kwargs = distribution_kwargs
        else:
            self.distribution_kwargs = dict(distribution_kwargs or {})
        self.distribution_class = distribution_class
        if out_keys is None:
            if isinstance(distribution_class, type) and issubclass(distribution_class, CompositeDistribution):
                name_map = self.distribution_kwargs.get("name_map") or {}
                out_keys = [name_map.get(k, k) for k in self.distribution_kwargs.get("distribution_map", {})]
            if not out_keys:
                msg = f"{owner}: out_keys is required (where to write the drawn value)."
                raise ValueError(msg)
        self.generator = _check_generator(generator, owner)
        self.in_keys = td_keys
        self.dist_sample_keys = _normalize_keys(out_keys, "out_keys", owner)
        if isinstance(default_interaction_type, str):
            default_interaction_type = InteractionType.from_str(default_interaction_type)
        self.default_interaction_type = default_interaction_type
        self.return_log_prob = bool(return_log_prob)
        if log_prob_keys is not None:
            self._given_lp_keys = _normalize_keys(log_prob_keys, "log_prob_keys", owner)
        elif log_prob_key is not None:
            self._given_lp_keys = [unravel_key(log_prob_key)]
        else:
            self._given_lp_keys = None  # type: ignore[assignment]
        # a composite module's log-prob layout depends on set_composite_lp_aggregate: the
        # mode it was built under is kept, and reading its keys under the other mode raises
        self._lp_mode_at_build = (
            bool(composite_lp_aggregate(nowarn=True))
            if self._given_lp_keys is None and len(self.dist_sample_keys) > 1
            else None
        )
        self.out_keys = list(self.dist_sample_keys) + (list(self.log_prob_keys) if self.return_log_prob else [])
        self.cache_dist = cache_dist
        self.n_empirical_estimate = n_empirical_estimate
        if num_samples is not None and not isinstance(num_samples, (tuple, list, torch.Size)):
            num_samples = (int(num_samples),)  # type: ignore[arg-type]
        self.num_samples = torch.Size(num_samples) if num_samples is not None else None
        self._dist = None

    def _repr_fields(self) -> list:
        return [
            ("distribution_class", self.distribution_class),
            ("distribution_kwargs", self.distribution_kwargs),
            ("default_interaction_type", self.default_interaction_type),
            ("num_samples", self.num_samples),
        ]

    def _check_lp_mode(self) -> None:
        built = self.__dict__.get("_lp_mode_at_build")
        if built is not None and bool(composite_lp_aggregate(nowarn=True)) != built:
            msg = (
                f"{type(self).__name__} was built under set_composite_lp_aggregate({built}) and is read "
                f"under set_composite_lp_aggregate({not built}): its log-prob keys differ between the two "
                "modes. Build the module under the mode it is used with."
            )
            raise RuntimeError(msg)

    @property
    def out_keys(self) -> list:
        """The sampled keys, then the log-prob keys when ``return_log_prob``."""
        self._check_lp_mode()
        return self.__dict__["_out_keys"]

    @out_keys.setter
    def out_keys(self, value: Any) -> None:
        self.__dict__["_out_keys"] = _normalize_keys(value, "out_keys", type(self).__name__)

    @property
    def log_prob_keys(self) -> list:
        """Where log-probabilities are written: the given keys, ``["sample_log_prob"]``
        while :func:`composite_lp_aggregate` is on, else ``"<key>_log_prob"`` per sampled key."""
        if self._given_lp_keys is not None:
            return list(self._given_lp_keys)
        self._check_lp_mode()
        if composite_lp_aggregate(nowarn=True):
            return ["sample_log_prob"]
        return [_lp_name(k) for k in self.dist_sample_keys]

    @property
    def log_prob_key(self) -> NestedKey:
        """The single log-probability key (see :attr:`log_prob_keys`).

        Raises:
            RuntimeError: there are several (a composite distribution without aggregation).
        """
        keys = self.log_prob_keys
        if len(keys) != 1:
            msg = (
                f"{type(self).__name__}.log_prob_key: the module writes {len(keys)} log-probabilities "
                f"({keys}); read log_prob_keys, or aggregate them with set_composite_lp_aggregate(True)."
            )
            raise RuntimeError(msg)
        return keys[0]

    @property
    def dist_params_keys(self) -> list:
        """The tensordict keys read to build the distribution."""
        return list(self._dist_keys.values())

    def __getattr__(self, name: str) -> Any:
        # Upstream keeps the keys in ``_in_keys``/``_out_keys``, and subclasses read them
        # (TorchRL's SafeProbabilisticModule); reached only when normal lookup fails.
        if name in ("_in_keys", "_out_keys"):
            keys = self.__dict__.get(name[1:])
            if keys is not None:
                return keys
        return super().__getattr__(name)

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

    def log_prob(self, tensordict: TensorDictBase, *, dist: D.Distribution | None = None, **kwargs: Any) -> Any:
        """Log-probability of the values stored at ``out_keys`` under the distribution.

        Returns:
            a tensor, or for a :class:`CompositeDistribution` what its ``log_prob`` returns.
        """
        if dist is None:
            dist = self.get_dist(tensordict)
        if isinstance(dist, CompositeDistribution):
            if dist._aggregate():
                # legacy layout: each "<key>_log_prob" is written into ``tensordict``; the sum is returned
                lps = dist.log_prob_composite(tensordict, include_sum=False, inplace=True)
                total = None
                for name in dist.name_map.values():
                    red = dist._reduce(lps.get(_lp_name(name)), len(dist.batch_shape))
                    total = red if total is None else total + red
                return total
            return dist.log_prob(tensordict)
        return dist.log_prob(*[tensordict.get(k) for k in self.dist_sample_keys])

    def _resolve_generator(self, tensordict: TensorDictBase) -> tuple[torch.Generator | None, Any]:
        """Upstream's name of :meth:`_generator_for` (TorchRL's SafeProbabilisticModule calls
        it and passes the generator to the write-back)."""
        gen, write_back = self._generator_for(tensordict)
        if write_back is None:
            return gen, None
        return gen, lambda *_: write_back()

    def _generator_for(self, tensordict: TensorDictBase) -> tuple[torch.Generator | None, Any]:
        """(generator, write-back) for this call; write-back stores the next seed of a key seed."""
        gen = self.generator
        if gen is None or isinstance(gen, torch.Generator):
            return gen, None
        raw = tensordict.get(gen)
        if isinstance(raw, NonTensorData):
            raw = raw.data
        if isinstance(raw, torch.Generator):
            return raw, None
        is_tensor = isinstance(raw, torch.Tensor)
        seeded = torch.Generator().manual_seed(int(raw))
        key = gen

        def write_back() -> None:
            nxt = int(torch.randint(0, 2**62, (), generator=seeded))
            if is_tensor:
                tensordict.set(key, torch.tensor(nxt, dtype=raw.dtype, device=raw.device))
            else:
                tensordict.set(key, NonTensorData(nxt))

        return seeded, write_back

    @_handles_kwargs
    def _dist_sample(
        self,
        dist: D.Distribution,
        interaction_type: InteractionType | None = None,
        *,
        generator: torch.Generator | None = None,
    ) -> Any:
        """A value drawn from ``dist`` (upstream's private helper, which TorchRL's actors call).

        ``interaction_type`` defaults to the ambient :func:`interaction_type`, then to
        :attr:`default_interaction_type`; ``generator`` seeds a ``RANDOM`` draw.
        ``num_samples`` adds leading sample dims as in :meth:`forward`.
        """
        itype = interaction_type or _INTERACTION_TYPE[0] or self.default_interaction_type
        if isinstance(itype, str):
            itype = InteractionType.from_str(itype)
        shape = self.num_samples or torch.Size()
        if itype is InteractionType.RANDOM and generator is not None:
            return _run_with_generator(generator, lambda: _draw(dist, itype, self.n_empirical_estimate, shape))
        return _draw(dist, itype, self.n_empirical_estimate, shape)

    def forward(
        self,
        tensordict: TensorDictBase | None = None,
        tensordict_out: TensorDictBase | None = None,
        _requires_sample: bool = True,
        **kwargs: Any,
    ) -> TensorDictBase:
        """Builds the distribution, draws a value and writes it at ``out_keys``.

        Returns:
            the TensorDict holding the value (``tensordict`` itself by default; with
            ``num_samples``, the input expanded to ``[*num_samples, *batch_size]``).

        Raises:
            KeyError: a parameter entry is missing (nothing is written).
        """
        if not isinstance(tensordict, TensorDictBase):
            td = self._td_from_call(tensordict, (), kwargs)
            out = _infer_batch_size_(self.forward(td, tensordict_out=tensordict_out))
            return _tensor_call_output(self, out, tensordict is not None)
        if _SKIP_EXISTING[0] and _all_present(tensordict, self.dist_sample_keys):
            return tensordict
        dest = tensordict if tensordict_out is None else tensordict_out
        dist = self.get_dist(tensordict)
        if _requires_sample:
            itype = _INTERACTION_TYPE[0] or self.default_interaction_type
            shape = self.num_samples or torch.Size()
            if itype is InteractionType.RANDOM and self.generator is not None:
                gen, write_back = self._generator_for(tensordict)
                value = _run_with_generator(gen, lambda: _draw(dist, itype, self.n_empirical_estimate, shape))
                if write_back is not None:
                    write_back()
            else:
                value = _draw(dist, itype, self.n_empirical_estimate, shape)
            if shape:
                dest = dest.expand(*shape, *dest.batch_size)
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
                sample = values[0] if _requires_sample else tensordict
                if dist._aggregate():
                    # legacy layout: each "<key>_log_prob" plus their sum at log_prob_key
                    lps = dist.log_prob_composite(sample, include_sum=False)
                    dest.update(lps)
                    total = None
                    for _, lp in lps.items(True, True):
                        red = dist._reduce(lp, len(dist.batch_shape) + len(self.num_samples or ()))
                        total = red if total is None else total + red
                    dest.set(self.log_prob_keys[0], total)
                else:
                    dest.update(dist.log_prob(sample))  # type: ignore[arg-type]
            else:
                dest.set(self.log_prob_keys[0], dist.log_prob(*values))  # type: ignore[arg-type]
        return dest


def _is_prob(module: Any) -> bool:
    return isinstance(module, (ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential))


class ProbabilisticTensorDictSequential(TensorDictSequential):
    """A :class:`TensorDictSequential` whose steps include probabilistic modules.

    By default the last step is a :class:`ProbabilisticTensorDictModule` and
    :meth:`get_dist` runs every step but the last, then builds that step's
    distribution. With ``return_composite=True`` (required when probabilistic steps
    sit in the middle of the sequence, or when the last step is not probabilistic),
    :meth:`get_dist` runs the whole sequence and returns a
    :class:`CompositeDistribution` over every probabilistic step's samples. Without
    any probabilistic step the sequence behaves as a :class:`TensorDictSequential`.

    Args:
        *modules: the steps (or one ordered dict of named steps).

    Keyword Args:
        partial_tolerant (bool, optional): see :class:`TensorDictSequential`.
        return_composite (bool, optional): see above. Defaults to ``False`` when the
            last step is probabilistic, ``True`` otherwise.
        aggregate_probabilities (bool, optional): sum the log-probabilities of a
            composite distribution. Defaults to :func:`composite_lp_aggregate`.
        include_sum (bool, optional): kept for compatibility; the composite sum is
            written by :meth:`CompositeDistribution.log_prob_composite`.
        inplace (bool, optional): see :class:`TensorDictSequential`.
        selected_out_keys (list of NestedKey, optional): see :class:`TensorDictSequential`.

    Raises:
        ValueError: the last step is not probabilistic and ``return_composite=False``.

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

    def __init__(
        self,
        *modules: Any,
        partial_tolerant: bool = False,
        return_composite: bool | None = None,
        aggregate_probabilities: bool | None = None,
        include_sum: bool | None = None,
        inplace: bool | None = None,
        **kwargs: Any,
    ) -> None:
        mods = list(modules[0].values()) if len(modules) == 1 and isinstance(modules[0], Mapping) else list(modules)
        prob = [m for m in mods if _is_prob(m)]
        last_is_prob = bool(mods) and _is_prob(mods[-1])
        if not prob:
            return_composite = True
        elif not last_is_prob:
            if return_composite is False:
                last = type(mods[-1]).__name__ if mods else "nothing"
                msg = (
                    "ProbabilisticTensorDictSequential: the last step must be a ProbabilisticTensorDictModule "
                    f"when return_composite=False, got {last}."
                )
                raise ValueError(msg)
            return_composite = True
        elif return_composite is None:
            return_composite = False
        if inplace is not None:
            kwargs["inplace"] = inplace
        super().__init__(*modules, partial_tolerant=partial_tolerant, **kwargs)
        self.return_composite = bool(return_composite)
        self.aggregate_probabilities = aggregate_probabilities
        self.include_sum = include_sum
        self._requires_sample = bool(prob)
        self._det_part = TensorDictSequential(*mods[:-1]) if prob and not self.return_composite and mods[:-1] else None

    def _new_like(self, mods: list) -> TensorDictSequential:
        """A sub-sequence: probabilistic while it ends with a probabilistic step (or the
        sequence returns composites), else a plain :class:`TensorDictSequential`."""
        if self.return_composite and any(_is_prob(m) for m in mods):
            return type(self)(*mods, partial_tolerant=self.partial_tolerant, return_composite=True)
        if mods and _is_prob(mods[-1]):
            return type(self)(*mods, partial_tolerant=self.partial_tolerant)
        return TensorDictSequential(*mods, partial_tolerant=self.partial_tolerant)

    def forward(
        self,
        tensordict: TensorDictBase | None = None,
        *args: Any,
        tensordict_out: TensorDictBase | None = None,
        **kwargs: Any,
    ) -> TensorDictBase:
        """Runs the steps with :attr:`default_interaction_type` as the ambient
        :func:`interaction_type` when none is set, as tensordict 0.15.3 does.

        Modules inside the sequence that read :func:`interaction_type` (TorchRL's gSDE
        noise) then see the sequence's default rather than ``None``.
        """
        if _INTERACTION_TYPE[0] is not None:
            return super().forward(tensordict, *args, tensordict_out=tensordict_out, **kwargs)
        _INTERACTION_TYPE[0] = self.default_interaction_type
        try:
            return super().forward(tensordict, *args, tensordict_out=tensordict_out, **kwargs)
        finally:
            _INTERACTION_TYPE[0] = None

    # -------------------------------------------------------------- distributions
    def _prob_modules(self) -> list:
        return [m for m in self._modules_list() if _is_prob(m)]

    @property
    def default_interaction_type(self) -> InteractionType:
        """The last probabilistic step's default interaction type (``DETERMINISTIC`` without one)."""
        prob = self._prob_modules()
        return prob[-1].default_interaction_type if prob else InteractionType.DETERMINISTIC

    @property
    def dist_sample_keys(self) -> list:
        """The keys the probabilistic steps write their draws to."""
        if not self.return_composite:
            return self._modules_list()[-1].dist_sample_keys  # type: ignore[return-value]
        return [k for m in self._prob_modules() for k in m.dist_sample_keys]

    @property
    def dist_params_keys(self) -> list:
        """The keys the probabilistic steps build their distributions from."""
        if not self.return_composite:
            return self._modules_list()[-1].dist_params_keys  # type: ignore[return-value]
        return [k for m in self._prob_modules() for k in m.dist_params_keys]

    @property
    def log_prob_keys(self) -> list:
        """Where the probabilistic steps write log-probabilities."""
        return [k for m in self._prob_modules() for k in m.log_prob_keys]

    @property
    def log_prob_key(self) -> NestedKey:
        """The single log-probability key (the last probabilistic step's)."""
        prob = self._prob_modules()
        if not prob:
            msg = "ProbabilisticTensorDictSequential.log_prob_key: the sequence has no probabilistic step."
            raise RuntimeError(msg)
        return prob[-1].log_prob_key

    def get_dist_params(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Runs every step but the last (writing the distribution parameters)."""
        for m in self._modules_list()[:-1]:
            tensordict = m(tensordict)
        return tensordict

    def _composite(self, tensordict: TensorDictBase) -> CompositeDistribution:
        """Runs the sequence (sampling only keys not yet present) and gathers every step's distribution."""
        dists: dict = {}
        for m in self._modules_list():
            if _is_prob(m):
                dist = m.get_dist(tensordict)  # type: ignore[operator]
                if isinstance(dist, CompositeDistribution):
                    for key, sub in dist.dists.items():
                        dists[dist.name_map[key]] = sub
                else:
                    dists[m.dist_sample_keys[0]] = dist  # type: ignore[index]
                if not _all_present(tensordict, m.dist_sample_keys):  # type: ignore[arg-type]
                    tensordict = m(tensordict)
            else:
                tensordict = m(tensordict)
        return CompositeDistribution.from_distributions(
            tensordict, dists, aggregate_probabilities=self.aggregate_probabilities
        )

    def get_dist(self, tensordict: TensorDictBase) -> D.Distribution:
        """The distribution of the sequence.

        Returns:
            the last step's distribution (after running the previous steps), or with
            ``return_composite`` a :class:`CompositeDistribution` over every
            probabilistic step.
        """
        if self.return_composite:
            return self._composite(tensordict)
        tensordict = self.get_dist_params(tensordict)
        return self._modules_list()[-1].get_dist(tensordict)  # type: ignore[operator]

    build_dist_from_params = get_dist

    def log_prob(self, tensordict: TensorDictBase, *, dist: D.Distribution | None = None, **kwargs: Any) -> Any:
        """Log-probability of the samples stored in ``tensordict``.

        Returns:
            a tensor (one probabilistic last step, or aggregated), else a TensorDict
            of ``"<key>_log_prob"`` entries.
        """
        if self.return_composite:
            if dist is None:
                dist = self._composite(tensordict.copy())
            return dist.log_prob(tensordict)  # type: ignore[arg-type]
        if dist is None:
            dist = self.get_dist(tensordict)
        return self._modules_list()[-1].log_prob(tensordict, dist=dist)  # type: ignore[operator]
