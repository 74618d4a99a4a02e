"""The SLO flags `simulate`, `sweep` and `plan` share, with one meaning each and one unit rule.

  --slo KEY=LIMIT       percentile SLOs: `ttft_p99=2000` (a bare number is ms, as in vLLM), `2000ms`, `2s`
  --goodput NAME:MS...  vLLM's `vllm bench serve --goodput ttft:2000 tpot:50 e2el:30000` (judged at P99)
  --min-finished SHARE  the least share of judged requests that must finish (0.99)

vLLM's `--goodput` takes several pairs after one flag; click gives an option one value, so the
commands accept extra arguments (`EXTRA_ARGS`) and `resolve_slo` takes those that are NAME:MS pairs
(and refuses any other stray argument, as click would have).
"""

from __future__ import annotations

import re

import typer

from sim.errors import InputError
from sim.inputs.slo import DEFAULT_GOODPUT_MIN, SLO_KEYS, PlanSLO, describe_slo, parse_slo

EXTRA_ARGS = {"allow_extra_args": True}  # the commands' context_settings (see the module docstring)
_PAIR = re.compile(r"^[A-Za-z0-9_]+:\S+$")


def slo_option():
    return typer.Option(None, "--slo", show_default=False,
                        help=f"KEY=LIMIT, repeatable; a bare number is MILLISECONDS (as in vLLM): ttft_p99=2000, "
                             f"tpot_p99=50ms, e2e_p90=30s; keys: {', '.join(SLO_KEYS)}")


def goodput_option():
    return typer.Option(None, "--goodput", show_default=False,
                        help="vLLM's spelling of the SLOs: --goodput ttft:2000 tpot:50 e2el:30000 (ms, per request; "
                             "judged at P99, i.e. 99% of requests within)")


def min_finished_option():
    return typer.Option(None, "--min-finished", show_default=False,
                        help=f"least share of judged requests that must finish for the SLOs to be met "
                             f"[{DEFAULT_GOODPUT_MIN}]; with --slo / --goodput")


def resolve_slo(slo: list[str] | None, goodput: list[str] | None, extra_args: list[str],
                min_finished: float | None, required: bool = False) -> PlanSLO | None:
    """The PlanSLO of the flags (None when none given and not `required`). `extra_args`: the command's
    leftover arguments, each of which must be a vLLM NAME:MS pair following --goodput. `min_finished`
    (None: DEFAULT_GOODPUT_MIN) given without any SLO is refused: it would judge nothing."""
    for token in extra_args:
        if not (goodput and _PAIR.match(token)):
            raise InputError("arguments", token, "unexpected argument (SLOs: --slo ttft_p99=2000 or "
                                                 "--goodput ttft:2000 tpot:50)")
    pairs = [*(goodput or []), *extra_args]
    for token in pairs:
        if ":" not in token and _is_number(token):
            raise InputError("--goodput", token, "takes vLLM's SLO pairs NAME:MS (e.g. ttft:2000); the least "
                                                 "share of requests that must finish is --min-finished")
    if not (slo or pairs) and not required:
        if min_finished is not None:
            raise InputError("--min-finished", None, "has no effect without --slo or --goodput: give them or drop it")
        return None
    return parse_slo(slo or [], DEFAULT_GOODPUT_MIN if min_finished is None else min_finished, goodput_pairs=pairs)


def slo_line(spec: PlanSLO | None) -> str | None:
    """'SLOs: TTFT P99 <= 2.0 s, ...': what the commands print once the input is read, before the work."""
    return None if spec is None else f"SLOs: {describe_slo(spec)}"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
