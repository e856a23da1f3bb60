"""What the verdicts and the colours mean, rendered from the one declaration of each tolerance: the thresholds
(`verdict.Thresholds`, each field saying what it bounds, in which modes, and its CLI option) and the rounding-noise
rule with its per-dtype ulp table (`ulp.RULE`). The console prints `legend` when rows FAIL, the HTML page
`RULE.text()` and the thresholds (its chart's PASS limits), and the README the tolerance table this module renders:

    python -m tcmp.compare.report.legend --markdown

(a test checks the README holds that output word for word, so it cannot drift from the code).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import fields
from typing import Optional

from tcmp.compare.judge.metrics import Mode
from tcmp.compare.judge.verdict import Thresholds
from tcmp.compare.rules.ulp import RULE

MARKDOWN_BEGIN = (
    "<!-- tolerances: made by `python -m tcmp.compare.report.legend --markdown`; edit the code, not this -->"
)
MARKDOWN_END = "<!-- end of tolerances -->"


def legend(mode: Mode, t: Thresholds, worst_rows: str = "the worst rows above") -> list[str]:
    """What Result, "Accuracy Reached or Not" and the colours mean, with the thresholds of this compare (the
    console prints it when rows FAIL; the README holds it with the default thresholds, `markdown`)."""
    if mode is Mode.TENSOR:
        rules = [
            f"Result (tcmp's rule): PASS when Cosine >= {t.cosine:g} and MaxRelativeErr < {t.max_relative_err:g}. "
            f"Accuracy Reached or Not (msprobe's legacy rule): Yes when Cosine >= {t.legacy_cosine_floor:g}, "
            f"MaxAbsErr <= {t.legacy_max_abs_err_ceiling:g}, and not both Cosine < {t.legacy_cosine:g} and "
            f"MaxAbsErr > {t.legacy_max_abs_err:g}.",
            RULE.text(),
        ]
    elif mode is Mode.STATISTICS:
        rules = [
            f"Result (tcmp's rule): PASS when NormRelativeErr, MaxRelativeErr and MinRelativeErr are <= "
            f"{t.stats_relative_err:g} (a stat tiny against the tensor's range: its difference within "
            f"{t.stats_small_fraction:g} of the range) and no NaN/inf is on one side only. Accuracy Reached or Not "
            f"(msprobe's rule): Yes when NormRelativeErr <= {t.stats_accuracy_norm:g} and no NaN/inf is on one "
            "side only.",
            RULE.text(),
        ]
    else:
        return ["Result: PASS when both CRC-32 are equal; Accuracy Reached or Not says the same."]
    return [
        *rules,
        "They differ when an error lies between the two limits: FAIL/Yes is a small but real error - where an "
        "error starts is often FAIL/Yes, what it spreads to FAIL/No.",
        f"Colours (the HTML report, the --highlight xlsx, {worst_rows}): red = FAIL/No, or NaN/inf on one "
        "side only; "
        f"yellow = FAIL/Yes (look closer), not compared (N/A), or a PASS whose output error is >= "
        f"{t.magnitude_factor:g}x its inputs'; green = PASS.",
    ]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown() -> str:
    """The tolerance tables and the rules in the README's words: every threshold with its default, modes and
    option; the ulp unit of every dtype the rounding-noise rule knows; the legend of each mode (default thresholds)."""
    t = Thresholds()
    lines = [MARKDOWN_BEGIN, "", "| Threshold | Default | Modes | Option | What it bounds |", "|---|---|---|---|---|"]
    for f in fields(Thresholds):
        option = f.metadata["option"]
        modes = ", ".join(m.value for m in f.metadata["modes"])
        lines.append(
            f"| `{f.name}` | {getattr(t, f.name):g} | {modes} | {f'`{option}`' if option else '-'} | "
            f"{_cell(f.metadata['bounds'])} |"
        )
    lines += [
        "",
        f"Rounding noise (k = {RULE.k} ulp): one ulp of a dtype at a bench element b is "
        "2^(max(floor(log2|b|), e_min) - m).",
        "",
        "| dtype | m (stored significand bits) | one ulp relative to b's power of two "
        "| e_min (smallest normal exponent) |",
        "|---|---|---|---|",
    ]
    lines += [f"| {u.name} | {u.mantissa_bits} | {u.relative_step} | {u.min_exponent} |" for u in RULE.table]
    lines.append("")
    lines += [f"- **{mode.value} mode:** {legend(mode, t)[0]}" for mode in Mode]
    for line in legend(Mode.TENSOR, t, worst_rows="the worst rows on the console")[1:]:
        lines += ["", line]
    lines += ["", MARKDOWN_END]
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Print what the verdicts and colours mean (the default thresholds).")
    parser.add_argument("--markdown", action="store_true", help="the README's tolerance tables and rules")
    args = parser.parse_args(argv)
    if args.markdown:
        sys.stdout.write(markdown())
    else:
        for mode in Mode:
            sys.stdout.write(f"{mode.value}:\n" + "".join(f"  {line}\n" for line in legend(mode, Thresholds())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
