"""The compare's rules, shared by every stage: what torchair's converter and passes do to the FX graph (`torchair`),
how many units in the last place each dtype may differ by (`ulp`), how CANN rounds a cast (`cast_rounding`) and
what a cast's output is checked against (`cast_check`), how shapes are squeezed (`shapes`). Takes nothing from the
other stages."""
