"""Settings that a registered model or decoder brings with it: one :class:`Option` each.

An option is a ``train.run`` flag, a key of the run configuration (a model's in
``ModelConfig.options``, a decoder's in ``ModelConfig.decoder_options``) and a rule its
value must meet, all from one declaration (:mod:`tcnlm_tf.models.registry`,
:mod:`tcnlm_tf.decoders.registry`). Pure Python, so command-line parsing stays fast.
"""
from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Callable, Iterable, Mapping

from tcnlm_tf.arguments import finite_float
from tcnlm_tf.errors import UserError

#: ``Option.legacy`` of an option whose runs from before it existed used its default
SAME_AS_DEFAULT = object()


@dataclasses.dataclass(frozen=True)
class Option:
    """A model- or decoder-specific setting: the ``train.run`` flag ``--<name with dashes>``
    (or ``flag``; an on/off switch when ``type`` is ``bool``). ``valid(value)`` says whether
    a value is allowed; ``requirement`` completes the error message (``--flag
    <requirement>``). ``legacy`` is the value that a run saved before the option existed
    behaves as (its ``config.json`` lacks it; :meth:`RunConfig.from_dict` fills it in), when
    that differs from the default a new run gets."""

    name: str
    type: Callable[[str], Any]
    default: Any
    help: str
    valid: Callable[[Any], bool] = lambda value: True
    requirement: str = ""
    flag: str | None = None
    metavar: str | None = None
    legacy: Any = SAME_AS_DEFAULT

    @property
    def option_string(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def check(self, value: Any) -> None:
        if not self.valid(value):
            raise UserError(f"{self.option_string} {self.requirement} (got {value!r})")

    def add_to(self, group: argparse._ActionsContainer, help: str) -> None:
        """Add the option's flag to ``group`` (unset: None, so an explicit value is told
        from the default)."""
        if self.type is bool:
            group.add_argument(self.option_string, dest=self.name, action="store_true",
                               default=None, help=help)
            return
        group.add_argument(self.option_string, dest=self.name, metavar=self.metavar,
                           type=finite_float if self.type is float else self.type, help=help)


def options_by_name(specs: Iterable[Any]) -> dict[str, Option]:
    """Every option of the registered ``specs`` (each with ``options``) by name; an option
    several of them share appears once, and two different options may not share a name."""
    options: dict[str, Option] = {}
    for spec in specs:
        for option in spec.options:
            if options.setdefault(option.name, option) is not option:
                raise AssertionError(f"two different options are named {option.name}")
    return options


def check_settings(choice: str, spec: Any, given: Mapping[str, Any],
                   value: Callable[[str], Any], subject: Any) -> None:
    """The settings ``given`` for the registered ``spec`` chosen by ``choice`` (e.g.
    ``--model tcnlm``): a :class:`UserError` for one it does not have, for a value its
    option refuses (``value(name)``: the value, its default when unset) and for a rule of
    ``spec.checks`` that ``subject`` breaks."""
    unknown = set(given) - {option.name for option in spec.options}
    if unknown:
        raise UserError(f"{choice} has no option {sorted(unknown)[0]!r} (config.json was "
                        f"edited, or written for another {choice.split()[0][2:]})")
    for option in spec.options:
        option.check(value(option.name))
    for rule, message in spec.checks:
        if not rule(subject):
            raise UserError(message)


def positive(value) -> bool:
    return value is not None and value > 0


def positive_or_none(value) -> bool:
    return value is None or value > 0


def positive_list(value) -> bool:
    return bool(value) and all(v > 0 for v in value)


def rate(value) -> bool:
    """A dropout rate: in [0, 1)."""
    return value is not None and 0.0 <= value < 1.0
