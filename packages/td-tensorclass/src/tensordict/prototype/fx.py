"""``tensordict.prototype.fx``: upstream's path of the TensorDict-module tracer.

The tracer belongs to td-nn (``tensordict.nn.fx``); importing this module without
td-nn raises an ``ImportError`` naming the distribution.
"""

from tensordict.nn.fx import TDGraphModule, symbolic_trace

__all__ = ["TDGraphModule", "symbolic_trace"]
